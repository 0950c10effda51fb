package bench

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/vdpp/vdpp/comm"
)

func TestStartBarrierReleasesTogether(t *testing.T) {
	const world, late = 4, 3
	delay := 60 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	trs := comm.NewLocal(world, comm.Options{RecvTimeout: 5 * time.Second})
	t0 := time.Now()
	var wg sync.WaitGroup
	released := make([]time.Duration, world)
	errs := make([]error, world)
	for r := range world {
		wg.Go(func() {
			if r == late {
				time.Sleep(delay)
			}
			errs[r] = startBarrier(ctx, trs[r])
			released[r] = time.Since(t0)
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		if released[r] < delay {
			t.Errorf("rank %d released after %v, before rank %d arrived (%v)", r, released[r], late, delay)
		}
	}
}

func TestStartBarrierFailsOnSilentRank(t *testing.T) {
	ctx := context.Background()
	trs := comm.NewLocal(2, comm.Options{RecvTimeout: 50 * time.Millisecond})
	if err := startBarrier(ctx, trs[0]); err == nil {
		t.Fatal("barrier with a silent rank returned no error")
	}
}
