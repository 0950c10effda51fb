package wait

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A condition that holds at once is checked once, with no pause.
		var checks atomic.Int64
		start := time.Now()
		if !For(time.Second, func() bool { checks.Add(1); return true }) || checks.Load() != 1 || time.Since(start) != 0 {
			t.Fatalf("held at once: %d checks over %v", checks.Load(), time.Since(start))
		}
		// One that starts holding at 300 ms is seen within one interval of it.
		var set atomic.Bool
		go func() {
			// The event For waits for, at 300 ms on the bubble's fake clock: what is
			// tested is when For notices it.
			time.Sleep(300 * time.Millisecond)
			set.Store(true)
		}()
		start = time.Now()
		if !For(time.Second, set.Load) {
			t.Fatal("never saw the condition")
		}
		if d := time.Since(start); d < 300*time.Millisecond || d > 300*time.Millisecond+maxInterval {
			t.Fatalf("saw it after %v", d)
		}
		// One that never holds gives up at the limit, after a bounded number of checks.
		checks.Store(0)
		start = time.Now()
		if For(2*time.Second, func() bool { checks.Add(1); return false }) {
			t.Fatal("a condition that never holds held")
		}
		if d, n := time.Since(start), checks.Load(); d != 2*time.Second || n > 2*time.Second.Milliseconds()/maxInterval.Milliseconds()+8 {
			t.Fatalf("gave up after %v and %d checks", d, n)
		}
	})
}
