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

// Weights are a model's weight bytes by pipeline role, as held once loaded (float32):
// what each stage of a pipeline holds, so the planner costs every family's stages through
// one path.
type Weights struct {
	// Condition is what the first stage loads to prepare samples (SVD: the image encoder
	// and the VAE encoder; Wan: the text encoder when it encodes prompts).
	Condition int64
	// Denoisers are the denoiser, or the experts in step order (Wan 2.2's high- and
	// low-noise transformers); a stage holds those its steps use.
	Denoisers []int64
	// Decode is what the last stage loads to decode (the VAE decoder).
	Decode int64
	// Types are the bytes of every network sized, by the weight type they are held in
	// ("f32", "q8_0", ...: tensor/quant's names; Options.Weights.DType and the stored types
	// decide); nil from a family that holds float32 only.
	Types map[string]int64
}

// Weigher is implemented by families that size a folder's weights by role from its
// configs alone (the tensors each network declares), without loading them.
type Weigher interface {
	Weights(dir string, o Options) (Weights, error)
}
