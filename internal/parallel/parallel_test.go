package parallel

import (
	"sync"
	"testing"
)

func TestForCoversEachIndexOnce(t *testing.T) {
	for _, tc := range []struct{ n, grain int }{{0, 1}, {1, 1}, {7, 1}, {100, 3}, {100, 1000}, {5, 0}} {
		var mu sync.Mutex
		seen := make([]int, tc.n)
		calls := 0
		For(tc.n, tc.grain, func(lo, hi int) {
			mu.Lock()
			defer mu.Unlock()
			calls++
			if hi-lo < min(max(tc.grain, 1), tc.n) && calls > 1 {
				t.Errorf("n=%d grain=%d: range [%d, %d) shorter than the grain", tc.n, tc.grain, lo, hi)
			}
			for i := lo; i < hi; i++ {
				seen[i]++
			}
		})
		for i, c := range seen {
			if c != 1 {
				t.Fatalf("n=%d grain=%d: index %d visited %d times", tc.n, tc.grain, i, c)
			}
		}
		if calls > max(Workers(), 1) {
			t.Errorf("n=%d: %d ranges, more than %d workers", tc.n, calls, Workers())
		}
	}
}
