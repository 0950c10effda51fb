package nn

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"

	"github.com/gomlx/gomlx/backends"

	"github.com/vdpp/vdpp/tensor"
)

// RowParallelism returns how many executions of one program to run at once when a call can
// be split by rows (the batch rows of a UNet call, the frame chunks of a chunked VAE
// decode): GOMAXPROCS on simplego, whose ops run one after another on one core each (see
// SimpleGoConfig), so that two executions at once use two cores; 1 on XLA, which
// parallelises inside each op. VDPP_ROW_PARALLELISM, when set to a positive integer,
// overrides it (1 turns the splitting off).
func RowParallelism(b backends.Backend) int {
	if v, ok := envInt("VDPP_ROW_PARALLELISM"); ok && v > 0 {
		return v
	}
	if b == nil || !IsSimpleGo(b) {
		return 1
	}
	return runtime.GOMAXPROCS(0)
}

// RunSplit runs f on each [start, end) range, at most parallel at once, and joins the
// results along the first axis in range order. The first error (by range order) is
// returned.
func RunSplit(ranges [][2]int, parallel int, f func(start, end int) (*tensor.Dense, error)) (*tensor.Dense, error) {
	outs := make([]*tensor.Dense, len(ranges))
	errs := make([]error, len(ranges))
	sem := make(chan struct{}, max(1, parallel))
	var wg sync.WaitGroup
	for i, r := range ranges {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			outs[i], errs[i] = f(r[0], r[1])
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("rows [%d, %d): %w", ranges[i][0], ranges[i][1], err)
		}
	}
	if len(outs) == 1 {
		return outs[0], nil
	}
	return tensor.ConcatRows(outs)
}

// envInt reads an integer environment variable.
func envInt(name string) (int, bool) {
	v, err := strconv.Atoi(os.Getenv(name))
	return v, err == nil
}
