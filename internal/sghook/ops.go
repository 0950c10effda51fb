package sghook

import (
	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"

	"github.com/vdpp/vdpp/internal/kernels"
)

// installOps replaces simplego's executors of the float32 elementwise ops and transposes
// that networks run outside the fused ops (residual and embedding adds, activations,
// layout changes) with kernels that use every core and no per-element index iterator, on
// backends that run Ops. Other dtypes and other backends go to simplego's own executors.
func installOps() {
	binary := map[backends.OpType]kernels.BinaryOp{
		backends.OpTypeAdd: kernels.Add, backends.OpTypeSub: kernels.Sub,
		backends.OpTypeMul: kernels.Mul, backends.OpTypeDiv: kernels.Div,
		backends.OpTypeMax: kernels.Max, backends.OpTypeMin: kernels.Min,
	}
	for op, k := range binary {
		orig := nodeExecutors[op]
		nodeExecutors[op] = func(b *simplego.Backend, n *simplego.Node, in []*simplego.Buffer, owned []bool) (*simplego.Buffer, error) {
			shape := node(n).shape
			if shape.DType != dtypes.Float32 || !runs(b, Ops) {
				return orig(b, n, in, owned)
			}
			ls, rs := buffer(in[0]).shape, buffer(in[1]).shape
			lhs, _ := f32(in[0])
			rhs, _ := f32(in[1])
			out := outputBuffer(b, shape, in, owned, 1, 0)
			o, _ := f32(out)
			kernels.Binary(k, o[:shape.Size()], lhs, rhs, shape.Dimensions, rankTo(ls, shape), rankTo(rs, shape))
			return out, nil
		}
	}
	unary := map[backends.OpType]kernels.UnaryOp{
		backends.OpTypeExp: kernels.ExpOp, backends.OpTypeLogistic: kernels.SigmoidOp,
		backends.OpTypeErf: kernels.ErfOp, backends.OpTypeTanh: kernels.TanhOp,
	}
	for op, k := range unary {
		orig := nodeExecutors[op]
		nodeExecutors[op] = func(b *simplego.Backend, n *simplego.Node, in []*simplego.Buffer, owned []bool) (*simplego.Buffer, error) {
			shape := node(n).shape
			if shape.DType != dtypes.Float32 || !runs(b, Ops) {
				return orig(b, n, in, owned)
			}
			src, _ := f32(in[0])
			out := outputBuffer(b, shape, in, owned, 0)
			o, _ := f32(out)
			kernels.Unary(k, o[:shape.Size()], src[:shape.Size()])
			return out, nil
		}
	}
	origT := nodeExecutors[backends.OpTypeTranspose]
	nodeExecutors[backends.OpTypeTranspose] = func(b *simplego.Backend, n *simplego.Node, in []*simplego.Buffer, owned []bool) (*simplego.Buffer, error) {
		nd := node(n)
		perm, ok := nd.data.([]int)
		if nd.shape.DType != dtypes.Float32 || !ok || !runs(b, Ops) {
			return origT(b, n, in, owned)
		}
		src, _ := f32(in[0])
		out := getBufferForShape(b, nd.shape)
		o, _ := f32(out)
		kernels.Transpose(o[:nd.shape.Size()], src, buffer(in[0]).shape.Dimensions, perm)
		return out, nil
	}
}

// outputBuffer returns the buffer an elementwise op writes: the first of the inputs
// (tried in the order given) that the graph no longer needs and has the output's shape,
// marked as taken (simplego's convention: its slot in inputs is set to nil), or a new one.
func outputBuffer(b *simplego.Backend, shape shapes.Shape, in []*simplego.Buffer, owned []bool, order ...int) *simplego.Buffer {
	for _, i := range order {
		if owned[i] && buffer(in[i]).shape.Equal(shape) {
			out := in[i]
			in[i] = nil
			return out
		}
	}
	return getBufferForShape(b, shape)
}

// rankTo returns s's dimensions at the rank of out (a scalar is all ones).
func rankTo(s, out shapes.Shape) []int {
	if s.Rank() == out.Rank() {
		return s.Dimensions
	}
	d := make([]int, out.Rank())
	for i := range d {
		d[i] = 1
	}
	return d
}
