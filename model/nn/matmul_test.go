package nn

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import
)

// TestSimpleGoRowSplits: products that would run simplego's single-threaded small kernel
// are cut into one slice per CPU; large products are cut until every slice fits the small
// kernel, unless the broadcast weights would cost more than a quarter of x.
func TestSimpleGoRowSplits(t *testing.T) {
	cases := []struct {
		cpus, m, n, want int
	}{
		{2, 1792, 32, 2},     // small product: one slice per CPU
		{4, 1792, 32, 4},     // more CPUs, more slices
		{1, 1792, 32, 1},     // one CPU, small product: nothing to gain
		{2, 40, 32, 1},       // too few rows to split
		{2, 112, 128, 2},     // 56 rows each
		{2, 4096, 32, 2},     // 2048·32 = 65536 fits the small kernel
		{2, 14336, 64, 14},   // slices of 1024 rows fit the small kernel
		{2, 14336, 512, 1},   // 112 slices of the weight: left to the large kernel
		{2, 17, 4096, 1},     // prime row count, too large for the small kernel
		{2, 65535, 1, 3},     // odd m: the smallest divisor ≥ the CPU count
		{2, 65537, 1, 1},     // prime m: only 1-row slices fit; left to the large kernel
		{3, 1792 * 2, 48, 4}, // 3 does not divide 3584; 4 does
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("cpus%d-m%d-n%d", c.cpus, c.m, c.n), func(t *testing.T) {
			if got := simpleGoRowSplits(c.cpus, c.m, c.n); got != c.want {
				t.Fatalf("simpleGoRowSplits(%d, %d, %d) = %d, want %d", c.cpus, c.m, c.n, got, c.want)
			}
		})
	}
}

// TestMatMulNT: the split product equals x·wᵀ (a naive reference) for shapes that take
// every branch, and is bit-identical to a single DotGeneral whenever that one also runs the
// small kernel (each output is the same dot product in the same order).
func TestMatMulNT(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	cases := []struct{ m, k, n int }{
		{1, 5, 3}, {64, 32, 32}, {1792, 32, 32}, {97, 40, 24}, {4096, 9, 32}, {2048, 16, 64},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("M%d-K%d-N%d", c.m, c.k, c.n), func(t *testing.T) {
			x, w := randDense(r, c.m, c.k), randDense(r, c.n, c.k)
			got := runOp(t, func(in []*Node) *Node { return MatMulNT(in[0], in[1]) }, x, w)
			checkClose(t, "MatMulNT", got, refLinear(x, w, nil), tol)
			if c.m*c.n <= simpleGoSmallDot && IsSimpleGo(testBackend(t)) {
				plain := runOp(t, func(in []*Node) *Node {
					return DotGeneral(in[0], []int{1}, nil, in[1], []int{1}, nil)
				}, x, w)
				if !slices.Equal(got.Data, plain.Data) {
					t.Fatalf("split product differs from the single DotGeneral (max abs diff %g)", maxAbs(got.Data, plain.Data))
				}
			}
		})
	}
}

func maxAbs(a, b []float32) float64 {
	m := 0.0
	for i := range a {
		m = max(m, float64(a[i]-b[i]), float64(b[i]-a[i]))
	}
	return m
}
