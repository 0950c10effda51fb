package nn

import (
	"fmt"
	"slices"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/vdpp/vdpp/internal/sghook"
)

// GradientSafe reports whether the ops must avoid forward Slice nodes in g, whose gradient
// needs the Pad op simplego lacks: g is a simplego graph that is not an inference graph
// (one a Program builds), so its gradient may be taken. Then convolutions use ConvGather,
// GEGLU splits with a mask instead of SliceAxis and attention is never chunked; the values
// are the same. A training graph needs no marking for this: it is simply not built by a
// Program.
func GradientSafe(g *Graph) bool { return IsSimpleGo(g.Backend()) && !sghook.IsInference(g) }

// SplitHalves splits x along its last axis into its first and second halves, as two
// SliceAxis would; in a GradientSafe graph it multiplies by 0/1 masks and sums instead
// (x·1 + y·0 is exact for finite values), so its gradient needs no Pad.
func SplitHalves(x *Node) (first, second *Node) {
	n := x.Shape().Dim(-1)
	if n%2 != 0 {
		panic(fmt.Errorf("nn: SplitHalves: last axis %d is odd", n))
	}
	if !GradientSafe(x.Graph()) {
		return SliceAxis(x, -1, AxisRange(0, n/2)), SliceAxis(x, -1, AxisRange(n/2, n))
	}
	dims := slices.Clone(x.Shape().Dimensions)
	r := len(dims)
	pair := append(dims[:r-1:r-1], 2, n/2)
	xp := Reshape(x, pair...) // [..., 2, n/2]
	pick := func(i int) *Node {
		m := []float32{0, 0}
		m[i] = 1
		mask := Reshape(Const(x.Graph(), m), append(ones(r-1), 2, 1)...)
		return ReduceSum(Mul(xp, ConvertDType(mask, x.DType())), r-1)
	}
	return pick(0), pick(1)
}

// PickAxis returns element i of x's axis, that axis removed: Squeeze(SliceAxis(x, axis,
// AxisElem(i)), axis). In a GradientSafe graph it multiplies by a one-hot mask along the
// axis and sums it away instead (x·1 + y·0 is exact for finite values), so its gradient
// needs no Pad.
func PickAxis(x *Node, axis, i int) *Node {
	r := x.Rank()
	if axis < 0 {
		axis += r
	}
	n := x.Shape().Dim(axis)
	if i < 0 || i >= n {
		panic(fmt.Errorf("nn: PickAxis: element %d of an axis of %d", i, n))
	}
	if !GradientSafe(x.Graph()) {
		return Squeeze(SliceAxis(x, axis, AxisElem(i)), axis)
	}
	m := make([]float32, n)
	m[i] = 1
	dims := ones(r)
	dims[axis] = n
	mask := Reshape(Const(x.Graph(), m), dims...)
	return ReduceSum(Mul(x, ConvertDType(mask, x.DType())), axis)
}

func ones(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = 1
	}
	return s
}

// convGather is the im2col convolution with the patches gathered by one Gather (whose
// gradient, a ScatterSum, simplego runs) instead of strided Slices. The patches have the
// same layout [N·o..., K·C] as convIm2Col's, so the values are the same.
func convGather(x, w *Node, stride int, pads [][2]int) *Node {
	d := x.Rank() - 2
	xd := x.Shape().Dimensions
	kd := w.Shape().Dimensions
	n, c, o := xd[0], xd[1], kd[0]

	perm := make([]int, d+2)
	for i := range d {
		perm[1+i] = 2 + i
	}
	perm[d+1] = 1
	h := TransposeAllAxes(x, perm...)
	for i := range d {
		h = padAxis(h, 1+i, pads[i][0], pads[i][1])
	}
	hd := h.Shape().Dimensions // [N, padded..., C]
	out := make([]int, d)
	k, positions, padded := 1, 1, 1
	for i := range d {
		out[i] = (hd[1+i]-kd[2+i])/stride + 1
		k *= kd[2+i]
		positions *= out[i]
		padded *= hd[1+i]
	}
	// Row index of every (n, output position, kernel offset) in h flattened to [N·padded, C].
	idx := make([]int32, 0, n*positions*k)
	opos := make([]int, d)
	off := make([]int, d)
	for b := range n {
		for p := range positions {
			rem := p
			for i := d - 1; i >= 0; i-- {
				opos[i] = rem % out[i]
				rem /= out[i]
			}
			for i := range off {
				off[i] = 0
			}
			for range k {
				lin := 0
				for i := range d {
					lin = lin*hd[1+i] + opos[i]*stride + off[i]
				}
				idx = append(idx, int32(b*padded+lin))
				for i := d - 1; i >= 0; i-- {
					off[i]++
					if off[i] < kd[2+i] {
						break
					}
					off[i] = 0
				}
			}
		}
	}
	g := x.Graph()
	indices := Reshape(Const(g, idx), len(idx), 1)
	patches := Gather(Reshape(h, n*padded, c), indices) // [N·positions·K, C]
	patches = Reshape(patches, n*positions, k*c)

	wperm := make([]int, d+2)
	for i := range d {
		wperm[1+i] = 2 + i
	}
	wperm[d+1] = 1
	wk := Reshape(TransposeAllAxes(w, wperm...), o, k*c)
	y := MatMulNT(patches, wk)                             // [N·positions, O]
	y = Reshape(y, append(append([]int{n}, out...), o)...) // [N, o..., O]
	back := make([]int, d+2)
	back[1] = d + 1
	for i := range d {
		back[2+i] = 1 + i
	}
	return TransposeAllAxes(y, back...)
}

// ContextScope returns a Scope that reads its tensors from the variables of ctx at ctx's
// current scope, each named by its full dotted name (the layout NewWeights uses), so the
// same network code builds a training graph whose weights are trainable variables. Param
// panics with ErrMissingTensor or ErrShapeMismatch as for Weights.
func ContextScope(ctx *context.Context) Scope { return Scope{src: ctxSource{ctx}} }

type ctxSource struct{ ctx *context.Context }

func (c ctxSource) param(g *Graph, name string, dims []int) *Node {
	v := c.ctx.GetVariableByScopeAndName(c.ctx.Scope(), name)
	if v == nil {
		panic(fmt.Errorf("%w %q", ErrMissingTensor, name))
	}
	if got := v.Shape().Dimensions; !slices.Equal(got, dims) {
		panic(fmt.Errorf("%w: %q is %v, network expects %v", ErrShapeMismatch, name, got, dims))
	}
	return v.ValueGraph(g)
}
