package sghook

import (
	"slices"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"

	"github.com/vdpp/vdpp/internal/gemm"
	"github.com/vdpp/vdpp/internal/kernels"
	"github.com/vdpp/vdpp/internal/parallel"
)

// minBatchWork is the least work (multiply-adds) a range of a batched product's items
// gets when the items run on several cores; internal/gemm splits one product's rows
// itself once it is large.
const minBatchWork = 1 << 16

// installDot replaces simplego's DotGeneral executor: on a backend that runs GEMM a float32
// product runs on internal/gemm, elsewhere simplego's own.
func installDot() {
	orig := nodeExecutors[backends.OpTypeDotGeneral]
	nodeExecutors[backends.OpTypeDotGeneral] = func(b *simplego.Backend, n *simplego.Node, in []*simplego.Buffer, owned []bool) (*simplego.Buffer, error) {
		p, ok := dotParams(n)
		if !ok || node(n).shape.DType != dtypes.Float32 || !runs(b, GEMM) {
			return orig(b, n, in, owned)
		}
		return dot(b, node(n).shape, p, in[0], in[1]), nil
	}
}

// dot computes a float32 DotGeneral: each operand is brought to [batch, cross, contraction]
// (batch and contracting axes in the order given, the other axes in order), which is
// simplego's own normalised layout, then every batch item is gemm.MulNT of the two. The
// output, [batch..., lhs cross..., rhs cross...], is that [batch, M, N] as it is.
func dot(b *simplego.Backend, out shapes.Shape, p *sgDotParams, lhs, rhs *simplego.Buffer) *simplego.Buffer {
	bs, m, n, k := p.batchSize, p.lhsCrossSize, p.rhsCrossSize, p.contractingSize
	a, freeA := normalized(b, lhs, p.lhsContractingAxes, p.lhsBatchAxes)
	w, freeW := normalized(b, rhs, p.rhsContractingAxes, p.rhsBatchAxes)
	res := getBufferForShape(b, out)
	c, _ := f32(res)
	work := max(m*n*k, 1)
	parallel.For(bs, (minBatchWork+work-1)/work, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			gemm.MulNT(m, n, k, a[i*m*k:(i+1)*m*k], w[i*n*k:(i+1)*n*k], c[i*m*n:(i+1)*m*n])
		}
	})
	freeA()
	freeW()
	return res
}

// normalized returns x's values in the layout [batch axes, cross axes, contracting axes]
// and a function that releases them: x's own data when that is already the layout, else a
// transposed copy in a buffer of simplego's pool.
func normalized(b *simplego.Backend, x *simplego.Buffer, contracting, batch []int) ([]float32, func()) {
	src, _ := f32(x)
	dims := buffer(x).shape.Dimensions
	perm := make([]int, 0, len(dims))
	perm = append(perm, batch...)
	for a := range dims {
		if !slices.Contains(batch, a) && !slices.Contains(contracting, a) {
			perm = append(perm, a)
		}
	}
	perm = append(perm, contracting...)
	if inOrder(perm, dims) {
		return src, func() {}
	}
	size := buffer(x).shape.Size()
	tmp := getBufferForShape(b, shapes.Make(dtypes.Float32, size))
	t, _ := f32(tmp)
	kernels.Transpose(t[:size], src[:size], dims, perm)
	return t, func() { putBuffer(b, tmp) }
}

// inOrder reports whether permuting axes of dims by perm keeps the data in place: the axes
// that are not 1 keep their order.
func inOrder(perm, dims []int) bool {
	last := -1
	for _, a := range perm {
		if dims[a] == 1 {
			continue
		}
		if a < last {
			return false
		}
		last = a
	}
	return true
}
