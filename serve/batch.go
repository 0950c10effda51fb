package serve

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

// batchKey is what samples must share to run in one denoiser call: the schedule (steps),
// the step range, the latent shape and the guidance weights.
type batchKey struct {
	steps, start, end int
	shape             []int
	guidance          []float32
}

func (a batchKey) compatible(b batchKey) bool {
	return a.steps == b.steps && a.start == b.start && a.end == b.end && slices.Equal(a.shape, b.shape) &&
		(a.guidance == nil) == (b.guidance == nil) && slices.EqualFunc(a.guidance, b.guidance, func(x, y float32) bool {
		return math.Float32bits(x) == math.Float32bits(y)
	})
}
