package dispatch

import (
	"math"
	"slices"

	"github.com/vdpp/vdpp/pipeline"
)

// Pure rules of the coordinator: where a sample at a given step runs, and which samples may
// share a denoiser call.

// stagePlan returns the stage ranges of a job with `steps` steps on `workers` live workers:
// min(steps, workers) contiguous ranges from pipeline.EvenStages.
func stagePlan(steps, workers int) ([]pipeline.Range, error) {
	return pipeline.EvenStages(steps, min(steps, workers))
}

// stageOf returns the index of the range holding step s and that range's end.
func stageOf(plan []pipeline.Range, s int) (stage, end int) {
	for i, r := range plan {
		if s >= r.Start && s < r.End {
			return i, r.End
		}
	}
	return -1, -1
}

// batchKey is what samples must share to run in one denoiser call: the schedule (steps and
// the run spec),
// the step range, the latent shape, the guidance weights, the temporal windows and the
// step cache's rule.
type batchKey struct {
	steps, start, end int
	spec              string // the run spec (sampler choice)
	shape             []int
	guidance          []float32
	windows           *pipeline.Windows
	cache             pipeline.Cache
}

func (a batchKey) compatible(b batchKey) bool {
	return a.steps == b.steps && a.spec == b.spec && a.start == b.start && a.end == b.end && slices.Equal(a.shape, b.shape) &&
		sameWeights(a.guidance, b.guidance) && sameWindows(a.windows, b.windows) && pipeline.SameCache(a.cache, b.cache)
}

func sameWeights(a, b []float32) bool {
	return (a == nil) == (b == nil) && slices.EqualFunc(a, b, func(x, y float32) bool {
		return math.Float32bits(x) == math.Float32bits(y)
	})
}

// sameWindows reports whether two items step their frames as the same windows.
func sameWindows(a, b *pipeline.Windows) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Size == b.Size && a.Overlap == b.Overlap && a.Blend == b.Blend && sameWeights(a.Guidance, b.Guidance)
}
