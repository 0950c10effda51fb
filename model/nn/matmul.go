package nn

import (
	"runtime"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import
)

// simpleGoSmallDot is simplego's (GoMLX v0.26) threshold between its two DotGeneral
// kernels: a product whose lhs-cross × rhs-cross size per batch element is at most this
// (16 blocks of 64×64) runs the "small" kernel, which parallelises over the batch axis only,
// so a product without a batch axis runs on one core.
const simpleGoSmallDot = 16 * 64 * 64

// minRowsPerSplit is the fewest rows a batch slice of a split product gets: below it the
// goroutine hand-off costs more than the second core saves.
const minRowsPerSplit = 32

// MatMulNT returns x·wᵀ for x [M, K] and w [N, K]: [M, N]. It is the one place that shapes
// the plain matrix products of Linear and the convolutions for the backend. On simplego the
// rows are cut into P slices stacked on a batch axis (w broadcast to each; P from
// rowSplits) so that every slice runs simplego's small kernel and the slices run in
// parallel: a product that would run the small kernel on one core gets every core, and one
// that would run the large kernel skips its re-blocking copies and 64-padding. In the small
// kernel each output element is the same dot product in the same order however the rows are
// sliced, so a split of a small product is bit-identical to the single DotGeneral. Elsewhere
// (XLA), and on a simplego backend that runs vdpp's matrix kernel (Kernels.GEMM: it splits
// the rows over the cores itself, without copies of w), it is one DotGeneral.
func MatMulNT(x, w *Node) *Node {
	m, k, n := x.Shape().Dim(0), x.Shape().Dim(1), w.Shape().Dim(0)
	if p := rowSplits(x.Graph(), m, n); p > 1 {
		xb := Reshape(x, p, m/p, k)
		wb := BroadcastToDims(InsertAxes(w, 0), p, n, k)
		return Reshape(DotGeneral(xb, []int{2}, []int{0}, wb, []int{2}, []int{0}), m, n)
	}
	return DotGeneral(x, []int{1}, nil, w, []int{1}, nil)
}

// rowSplits returns how many row slices MatMulNT cuts an [m, k]·[n, k]ᵀ product into on
// the graph's backend. Elsewhere than simplego it is 1. On simplego it is the smallest P
// dividing m such that each slice runs the small kernel ((m/P)·n ≤ simpleGoSmallDot) and
// there are at least as many slices as CPUs (each keeping minRowsPerSplit rows): the small
// kernel then needs no re-blocking copies of its operands (the large one copies both into
// 64×64 blocks, padding every dimension to a multiple of 64) and runs the slices in
// parallel. The weight is broadcast to every slice, so a split whose P copies of w would
// exceed a quarter of x (P·n > m/4) is not made and the product is left to the large
// kernel (1 is returned).
func rowSplits(g *Graph, m, n int) int {
	if !IsSimpleGo(g.Backend()) {
		return 1
	}
	if gemmBackend(g.Backend()) {
		return 1 // internal/gemm splits the rows itself, without copies of w
	}
	return simpleGoRowSplits(runtime.NumCPU(), m, n)
}

// simpleGoRowSplits is rowSplits on simplego with cpus CPUs.
func simpleGoRowSplits(cpus, m, n int) int {
	want := max(1, min(cpus, m/minRowsPerSplit))
	for p := want; p <= m; p++ {
		if m%p != 0 || (m/p)*n > simpleGoSmallDot {
			continue
		}
		if p > want && p*n > m/4 {
			return 1
		}
		return p
	}
	return 1
}
