package dispatch

import (
	"math"
	"time"
)

// The stall watchdog's limit scales with the work of the batch it watches. Workers report
// each step's compute time; the coordinator keeps a running mean of seconds per unit of
// work (a row's latent elements, doubled when guided), so a batch of a shape never seen
// before gets a limit extrapolated from the others, and a slow but healthy step (a large
// job on a small machine) is not mistaken for a hang. A batch re-run after a stall gets
// twice the limit of its previous run, so an estimate that was too short cannot kill the
// same work forever.
const (
	// stallFactor is how many expected step times a batch may stay silent.
	stallFactor = 4
	// stepRateWeight is the weight of a new observation in the running mean.
	stepRateWeight = 0.2
	// maxStallDoublings bounds the doubling per re-run.
	maxStallDoublings = 8
)

// batchWork is the work of one denoiser step on rows samples of latent shape (leading
// batch dimension included or not: only the elements per row count), doubled when guided
// (both CFG halves run). batchWork is pure.
func batchWork(rows int, shape []int, guided bool) float64 {
	per := 1.0
	for i, d := range shape {
		if i == 0 && len(shape) == 5 {
			continue // the batch dimension of [1, T, C, H, W]
		}
		per *= float64(d)
	}
	w := float64(rows) * per
	if guided {
		w *= 2
	}
	return w
}

// stallLimit is how long a batch of the given work may go without reporting a step: base
// (the configured --stall-timeout) or stallFactor times the expected step time at perUnit
// seconds per unit of work, whichever is longer, doubled for each earlier stalled run
// (reruns). A base <= 0 disables the watchdog (0). stallLimit is pure.
func stallLimit(base time.Duration, perUnit, work float64, reruns int) time.Duration {
	if base <= 0 {
		return 0
	}
	expected := time.Duration(math.Min(stallFactor*perUnit*work*float64(time.Second), float64(24*time.Hour)))
	limit := max(base, expected)
	return limit << min(max(reruns, 0), maxStallDoublings)
}

// stepRate is the running mean of seconds per unit of work over reported steps.
type stepRate struct{ perUnit float64 }

func (r *stepRate) observe(seconds, work float64) {
	if work <= 0 || seconds < 0 {
		return
	}
	v := seconds / work
	if r.perUnit == 0 {
		r.perUnit = v
		return
	}
	r.perUnit += stepRateWeight * (v - r.perUnit)
}

// batchStallInfo is the work of b and how many of its rows' earlier runs stalled (the
// most of any row).
func batchStallInfo(b *batch) (work float64, reruns int) {
	rows := 0
	var shape []int
	guided := false
	for _, it := range b.items {
		if it == nil {
			continue
		}
		rows++
		shape, guided = it.latent.Shape, it.guidance != nil
		reruns = max(reruns, it.stalls)
	}
	return batchWork(rows, shape, guided), reruns
}
