package plan

import (
	"fmt"
	"math"

	"github.com/vdpp/vdpp/pipeline"
)

// StepCost is the cost of one denoising step on one device for a batch of rows and a
// number of frames (see StepCost.MS in formulas.go).
type StepCost struct {
	// FixedMS is paid once per call whatever the batch.
	FixedMS float64 `json:"fixed_ms"`
	// RowMS is the cost of one row at RefFrames frames.
	RowMS float64 `json:"row_ms"`
	// RefFrames is the frame count RowMS was measured at.
	RefFrames int `json:"ref_frames"`
	// FrameScaling in [0, 1] is the part of RowMS that scales with the frame count
	// (1: cost proportional to frames; 0: independent of frames).
	FrameScaling float64 `json:"frame_scaling"`
}

// Link is the cost of one message between two devices (Link.MS in formulas.go).
type Link struct {
	LatencyMS float64 `json:"latency_ms"`
	// BytesPerS is the bandwidth; 0 means unlimited.
	BytesPerS float64 `json:"bytes_per_s"`
}

// GroupCost is a measured all-gather over Size processes, each contributing Bytes: the
// mean time one step of a group loses to it (see ProcessCalibrator). A cfg x cp mesh uses
// the entry for cfg*cp: its steps gather frames and halves in one all-gather.
type GroupCost struct {
	Size  int     `json:"size"`
	Bytes int64   `json:"bytes"`
	MS    float64 `json:"ms"`
}

// Weights are the weight bytes a device holds, by pipeline role, as the model's family
// sizes them (FamilyWeights): the first stage holds the conditioner, every
// stage the denoiser (or the experts its steps use), the last stage the decoder.
type Weights struct {
	// Condition is the first stage's conditioner (SVD: image encoder and VAE encoder;
	// Wan: the text encoder when it encodes prompts).
	Condition int64 `json:"condition"`
	Denoiser  int64 `json:"denoiser"`
	// Decode is the last stage's decoder (the VAE decoder).
	Decode int64 `json:"decode"`
	// Experts, when the denoiser switches by step (Wan 2.2's high- and low-noise
	// experts), are the weight bytes of each expert in step order, and ExpertSwitches the
	// first step of each expert after the first; Denoiser is then their sum. A stage holds
	// only the experts its steps use, so data parallelism holds all of them on every device
	// while a pipeline cut at the switches holds one.
	Experts        []int64 `json:"experts,omitempty"`
	ExpertSwitches []int   `json:"expert_switches,omitempty"`
	// Types are the bytes of every network, by the weight type they are held in ("f32",
	// "q8_0", ...; --weights-dtype and the stored types decide); the family's sizes.
	Types map[string]int64 `json:"types,omitempty"`
}

// StageDenoiser is the denoiser weight memory of a stage running steps [start, end): the
// experts whose steps it meets, or the whole Denoiser without experts.
func (w Weights) StageDenoiser(start, end int) int64 {
	if len(w.Experts) == 0 || len(w.ExpertSwitches) != len(w.Experts)-1 {
		return w.Denoiser
	}
	var sum int64
	lo := 0
	for i, b := range w.Experts {
		hi := math.MaxInt
		if i < len(w.ExpertSwitches) {
			hi = w.ExpertSwitches[i]
		}
		if lo < end && start < hi && lo < hi {
			sum += b
		}
		lo = hi
	}
	return sum
}

// Total is the memory one device needs to hold every component.
func (w Weights) Total() int64 { return w.Condition + w.Denoiser + w.Decode }

// Costs are the measured (or given) costs the model predicts from.
type Costs struct {
	Step StepCost `json:"step"`
	// HandOff carries one latent from a pipeline stage to the next.
	HandOff Link `json:"hand_off"`
	// Collective is the per-message cost inside a cfg or cp group (all-gather, all-to-all)
	// where no measured group cost applies.
	Collective Link `json:"collective"`
	// AllGathers are all-gathers measured between real processes, one per group size; an
	// all-gather over a group of a listed size costs its MS (plus Collective's bandwidth
	// term for bytes beyond the measured ones) instead of the Collective link's ring.
	AllGathers []GroupCost `json:"all_gathers,omitempty"`
	// CPAllToAllsPerStep is how many all-to-alls a cp group runs per denoising step inside
	// the model (for the SVD UNet: two per temporal layer; 0 for the synthetic model). The
	// all-gather of the outputs that ends every cp step is always counted.
	CPAllToAllsPerStep int `json:"cp_all_to_alls_per_step"`
	// CPBytesPerFrame is what each all-to-all moves per row and per local frame; 0 means
	// the latent's frame size.
	CPBytesPerFrame int64 `json:"cp_bytes_per_frame"`
	// PrepareMS is the per-sample conditioning cost on stage 0 (image encoder, VAE
	// encode, noise); FinishMS the per-sample decode on the last stage.
	PrepareMS float64 `json:"prepare_ms"`
	FinishMS  float64 `json:"finish_ms"`
	// DecodePartMS is the VAE decode of one part of one sample (a decode chunk of frames,
	// which decodes independently of the others), DecodeParts the parts of a sample; the
	// decode is then DecodeParts * DecodePartMS per sample on top of FinishMS, on the last
	// stage or spread over the last stages part by part (Workload.DecodeRanks).
	DecodePartMS float64 `json:"decode_part_ms,omitempty"`
	DecodeParts  int     `json:"decode_parts,omitempty"`
	Weights      Weights `json:"weights"`
	// ActivationBytesPerRowFrame is working memory per row and local frame during a step.
	ActivationBytesPerRowFrame int64 `json:"activation_bytes_per_row_frame"`
	// Cache, when set, is a static step cache (docs/caching.md): its steps' computed work
	// cuts the stages and costs them.
	Cache *CacheCosts `json:"cache,omitempty"`
}

// CacheCosts are what a static step cache changes in a run: the steps that reuse the
// cache (Rule, with every expert's first step computing) cost ReuseFraction of a full
// step's computation, and unless the rule drops it at stage boundaries each hand-off
// carries StateBytes per sample and CFG branch (a context-parallel rank its frames' share).
type CacheCosts struct {
	Rule          pipeline.Cache `json:"rule"`
	ReuseFraction float64        `json:"reuse_fraction"`
	// CutFraction is the reuse fraction the engine cuts stages by (the family's count of
	// a reusing call's operations, family.CacheCost); 0: ReuseFraction. The planner cuts
	// by it, so its stages are the engine's, and costs them by ReuseFraction.
	CutFraction float64 `json:"cut_fraction,omitempty"`
	StateBytes  int64   `json:"state_bytes"`
}

// cut is the reuse fraction stages are cut by.
func (c *CacheCosts) cut() float64 {
	if c.CutFraction > 0 {
		return c.CutFraction
	}
	return c.ReuseFraction
}

// validate checks the cache's numbers and that its rule is static (an adaptive rule's
// computed steps are known only as the run goes).
func (c *CacheCosts) validate() error {
	switch {
	case c == nil:
		return nil
	case !c.Rule.Static():
		return fmt.Errorf("%w: the planner costs a static step cache (deepcache, static), not %q", ErrBadInput, c.Rule.Mode)
	case !(c.ReuseFraction >= 0 && c.ReuseFraction <= 1) || !(c.CutFraction >= 0 && c.CutFraction <= 1):
		return fmt.Errorf("%w: cache reuse_fraction %v or cut_fraction %v outside [0, 1]", ErrBadInput, c.ReuseFraction, c.CutFraction)
	case c.StateBytes < 0:
		return fmt.Errorf("%w: cache state_bytes %d", ErrBadInput, c.StateBytes)
	}
	return nil
}

// SyntheticCosts are the costs of the synthetic model at stepMS per sample-step (the cost
// is proportional to rows and, under cp, to the local frames), with hand-offs and
// collectives over link, and no weights.
func SyntheticCosts(stepMS float64, frames int, link Link) Costs {
	return Costs{
		Step:       StepCost{RowMS: stepMS, RefFrames: frames, FrameScaling: 1},
		HandOff:    link,
		Collective: link,
	}
}

// Validate checks that every cost is finite and non-negative and the shares are in range.
func (c Costs) Validate() error {
	fs := []struct {
		name string
		v    float64
	}{{"step.fixed_ms", c.Step.FixedMS}, {"step.row_ms", c.Step.RowMS}, {"step.frame_scaling", c.Step.FrameScaling},
		{"hand_off.latency_ms", c.HandOff.LatencyMS}, {"hand_off.bytes_per_s", c.HandOff.BytesPerS},
		{"collective.latency_ms", c.Collective.LatencyMS}, {"collective.bytes_per_s", c.Collective.BytesPerS},
		{"prepare_ms", c.PrepareMS}, {"finish_ms", c.FinishMS}, {"decode_part_ms", c.DecodePartMS}}
	for _, f := range fs {
		if f.v < 0 || math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return fmt.Errorf("%w: cost %s = %v", ErrBadInput, f.name, f.v)
		}
	}
	seen := map[int]bool{}
	for i, g := range c.AllGathers {
		if g.Size < 2 || g.Bytes < 0 || g.MS < 0 || math.IsNaN(g.MS) || math.IsInf(g.MS, 0) || seen[g.Size] {
			return fmt.Errorf("%w: all_gathers[%d] = %+v (size >= 2, once; bytes and ms >= 0)", ErrBadInput, i, g)
		}
		seen[g.Size] = true
	}
	if c.Step.FrameScaling > 1 {
		return fmt.Errorf("%w: step.frame_scaling %v > 1", ErrBadInput, c.Step.FrameScaling)
	}
	if c.Step.FrameScaling > 0 && c.Step.RefFrames < 1 {
		return fmt.Errorf("%w: step.ref_frames %d with frame scaling %v", ErrBadInput, c.Step.RefFrames, c.Step.FrameScaling)
	}
	is := []struct {
		name string
		v    int64
	}{{"cp_all_to_alls_per_step", int64(c.CPAllToAllsPerStep)}, {"cp_bytes_per_frame", c.CPBytesPerFrame},
		{"weights.condition", c.Weights.Condition}, {"weights.denoiser", c.Weights.Denoiser},
		{"weights.decode", c.Weights.Decode},
		{"activation_bytes_per_row_frame", c.ActivationBytesPerRowFrame}, {"decode_parts", int64(c.DecodeParts)}}
	for _, f := range is {
		if f.v < 0 {
			return fmt.Errorf("%w: %s = %d", ErrBadInput, f.name, f.v)
		}
	}
	return c.Cache.validate()
}
