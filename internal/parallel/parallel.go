// Package parallel splits loops over the CPU cores for vdpp's CPU kernels.
//
// Contract: For calls fn on disjoint, contiguous ranges that together cover [0, n), each
// range on one goroutine, and returns when all have returned. It never splits work the
// caller marked as too small (below grain items per range) and never runs more ranges at
// once than Workers reports. How the range is split must not change a kernel's result:
// kernels compute each output element within one call of fn, in an order that does not
// depend on the range bounds, so their results are the same bits for any split.
package parallel

import (
	"runtime"
	"sync"
)

// Workers is the most ranges For runs at once: GOMAXPROCS.
func Workers() int { return runtime.GOMAXPROCS(0) }

// For runs fn over [0, n) split into at most Workers() contiguous ranges of at least grain
// items (grain < 1 counts as 1). With one range it runs fn on the calling goroutine.
func For(n, grain int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	parts := min(Workers(), n/max(grain, 1))
	if parts <= 1 {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	for p := 1; p < parts; p++ {
		lo, hi := n*p/parts, n*(p+1)/parts
		wg.Go(func() { fn(lo, hi) })
	}
	fn(0, n/parts)
	wg.Wait()
}
