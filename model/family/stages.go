package family

import "github.com/vdpp/vdpp/pipeline"

// Switcher is implemented by families whose denoiser changes with the step (Wan 2.2's
// high- and low-noise experts): Switches returns the steps of a run of steps steps at which
// the denoiser changes, read from the folder without loading weights (none for a model
// with one denoiser).
type Switcher interface {
	Switches(dir string, steps int) ([]int, error)
}

// Switches returns the resolved model's denoiser switches for a run of steps steps (nil
// for a family that has none).
func (r Resolved) Switches(steps int) ([]int, error) {
	sw, ok := r.Family.(Switcher)
	if !ok {
		return nil, nil
	}
	return sw.Switches(r.Dir, steps)
}

// StagePlan cuts steps into stages for the resolved model: a stage boundary at every
// denoiser switch, so each stage loads only the denoiser its steps use, and the rest
// balanced (pipeline.CutStages with equal step costs). extra is each stage's fixed cost
// per item in steps (pipeline.StageExtras: a share of the decode on the decoding stages),
// which the cut balances against the steps, as the planner does; nil cuts by steps alone.
// Without switches and extras it is pipeline.EvenStages.
func (r Resolved) StagePlan(steps, stages int, extra []float64) ([]pipeline.Range, error) {
	cuts, err := r.Switches(steps)
	if err != nil {
		return nil, err
	}
	if len(cuts) == 0 && extra == nil {
		return pipeline.EvenStages(steps, stages)
	}
	cost := make([]float64, steps)
	for i := range cost {
		cost[i] = 1
	}
	return pipeline.CutStages(cost, stages, cuts, extra)
}

// ExpertWeights is implemented by Samplers whose denoiser switches by step: ExpertBytes
// returns the weight bytes of each expert in step order (0 for one this process did not
// load), for the planner.
type ExpertWeights interface {
	ExpertBytes() []int64
}
