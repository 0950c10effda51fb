package bench

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/vdpp/vdpp/comm"
)

// TestStartBarrierReleasesTogether, on a fake clock: no rank leaves the start barrier
// before the last one arrives, and every rank leaves then.
func TestStartBarrierReleasesTogether(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const world, late = 4, 3
		delay := 60 * time.Millisecond
		trs := comm.NewLocal(world, comm.Options{RecvTimeout: 5 * time.Second})
		defer func() {
			for _, tr := range trs {
				tr.Close()
			}
		}()
		t0 := time.Now()
		var wg sync.WaitGroup
		released := make([]time.Duration, world)
		errs := make([]error, world)
		for r := range world {
			wg.Go(func() {
				if r == late {
					// The late rank's arrival, on the bubble's clock: it is what the
					// barrier waits for, not an ordering guess.
					time.Sleep(delay)
				}
				errs[r] = startBarrier(context.Background(), trs[r])
				released[r] = time.Since(t0)
			})
		}
		wg.Wait()
		for r, err := range errs {
			if err != nil {
				t.Fatalf("rank %d: %v", r, err)
			}
			if released[r] != delay {
				t.Errorf("rank %d released after %v, want when rank %d arrived (%v)", r, released[r], late, delay)
			}
		}
	})
}

// TestStartBarrierFailsOnSilentRank, on a fake clock: a rank that never arrives fails the
// barrier at the receive timeout.
func TestStartBarrierFailsOnSilentRank(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		trs := comm.NewLocal(2, comm.Options{RecvTimeout: 50 * time.Millisecond})
		defer trs[0].Close()
		start := time.Now()
		if err := startBarrier(context.Background(), trs[0]); !errors.Is(err, comm.ErrTimeout) || time.Since(start) != 50*time.Millisecond {
			t.Fatalf("barrier with a silent rank: %v after %v, want a timeout at 50ms", err, time.Since(start))
		}
	})
}
