// Package model defines what the engine calls: the Denoiser (one network evaluation per
// denoising step on a batch of rows) and the conditioning it needs. Which models exist is
// the family registry's (package model/family): a model family supplies its denoiser
// through its Sampler; the simulator denoisers are families of their own
// (family.Denoisers).
//
// Contract: the model packages know nothing about ranks, stages or transports. Latents use
// SVD's layout [N, T, C, H, W] (rows, frames, channels, height, width). A Denoiser must be
// deterministic: the same Input gives bit-identical output, and the output of a row must not
// depend on which other rows share its batch unless the model documents otherwise (the
// engine's bit-exactness promise holds "for the same batch composition").
package model

import (
	"context"
	"fmt"
	"time"

	"github.com/vdpp/vdpp/tensor"
)

// Conditioning holds the per-sample tensors computed once (on pipeline stage 0) and handed
// along with the latent: for SVD the image embedding, the image latents and the added time
// ids; for the synthetic model a small vector. Names are model specific.
type Conditioning map[string]*tensor.Dense

// Input is one denoiser call on a batch of N rows.
type Input struct {
	// Latents is the model input [N, T, C, H, W], already scaled by the scheduler's
	// scale_model_input.
	Latents *tensor.Dense
	// Sigma is the noise level of this step; Timestep is what the network is conditioned
	// on (0.25*ln(sigma) for SVD's continuous timesteps).
	Sigma, Timestep float32
	// Step is the global step index (0-based), for models whose cost or output depends on it.
	Step int
	// FirstFrame is the index, in the whole sample, of Latents' first frame: 0 unless the
	// engine runs the sample as overlapping temporal windows (then the window's first
	// frame). A model whose conditioning is per frame (Wan's image-to-video condition
	// latents) reads its frames from there.
	FirstFrame int
	// Cond has one entry per row.
	Cond []Conditioning
	// Uncond marks rows to be evaluated unconditionally (classifier-free guidance); the model
	// decides what "unconditional" means (SVD: zero image embedding and zero image latents).
	Uncond []bool
}

// Rows returns the batch size N of the input.
func (in Input) Rows() int {
	if in.Latents == nil || len(in.Latents.Shape) == 0 {
		return 0
	}
	return in.Latents.Shape[0]
}

// Validate checks that the per-row slices match the latent batch size.
func (in Input) Validate() error {
	if in.Latents == nil || len(in.Latents.Shape) != 5 {
		return fmt.Errorf("model: latents must be [N,T,C,H,W], got %v", shapeOf(in.Latents))
	}
	n := in.Latents.Shape[0]
	if len(in.Cond) != n || len(in.Uncond) != n {
		return fmt.Errorf("model: %d latent rows but %d conditionings and %d uncond flags", n, len(in.Cond), len(in.Uncond))
	}
	return nil
}

func shapeOf(t *tensor.Dense) []int {
	if t == nil {
		return nil
	}
	return t.Shape
}

// Denoiser evaluates the network for one step on a batch. It returns the raw model output
// (a v-prediction for SVD) with the shape of in.Latents.
type Denoiser interface {
	Predict(ctx context.Context, in Input) (*tensor.Dense, error)
	// WeightBytes is the memory held by the denoiser's weights, for reports and the planner.
	WeightBytes() int64
}

// Paced is implemented by simulator denoisers whose cost is a wall-clock budget for a whole
// denoising step (the model call plus the scheduler arithmetic around it), so that the
// engine's own per-step work is inside the simulated cost rather than added to it. The engine
// calls Pace once per step, after the step, with the step's start time and the work this
// rank did in full-sample rows (a rank evaluating 2 rows on half of the frames reports 1);
// Pace returns when the budget is spent.
type Paced interface {
	Pace(start time.Time, rows float64)
}

// FrameLocal is implemented by denoisers that can say whether each frame's output depends
// on that frame alone (an elementwise simulator): a context-parallel step then exchanges
// nothing but the gathered output, which the planner costs.
type FrameLocal interface {
	FrameLocal() bool
}

// FrameComm is what a context-parallel group offers a model: exchanges between the ranks that
// each hold a slice of a sample's frames. Index and Size place this rank in the group.
type FrameComm interface {
	Index() int
	Size() int
	// AllToAll sends parts[i] to member i and returns what each member sent here.
	AllToAll(ctx context.Context, parts []*tensor.Dense) ([]*tensor.Dense, error)
	// AllGather returns every member's t, in member order.
	AllGather(ctx context.Context, t *tensor.Dense) ([]*tensor.Dense, error)
}

// FramePart places a context-parallel rank's frames: it holds frames [Lo, Hi) of Total.
type FramePart struct {
	Lo, Hi, Total int
	Comm          FrameComm
}

// ContextParallel is implemented by denoisers that can evaluate a slice of every row's
// frames as one member of a context-parallel group: in.Latents holds frames [Lo, Hi) only,
// and the model exchanges through part.Comm what its temporal layers need. The output covers
// the same frames. Models whose frames are independent need no exchange.
type ContextParallel interface {
	PredictFrames(ctx context.Context, in Input, part FramePart) (*tensor.Dense, error)
}

// Closer is implemented by denoisers that hold resources (compiled graphs, mmaps).
type Closer interface{ Close() error }

// Config carries every knob a simulator denoiser's constructor may read (family.Denoisers'
// New). Fields a model does not use are ignored.
type Config struct {
	Name           string
	Dir            string  // checkpoint folder (svd)
	Variant        string  // checkpoint variant, e.g. "fp16"
	StepMS         float64 // synthetic: cost per sample-step in milliseconds
	Cost           string  // synthetic: "sleep" (default) or "spin"
	HiddenChannels int     // dummy
	LatentChannels int     // dummy
	Seed           int64   // weights seed (dummy)
	Backend        string  // GoMLX backend spec; "" means the default
}

// LatentFinisher is implemented by denoisers that condition a sample by standing in some of
// its latent's values at every call (Wan 2.2 TI2V's image latents in frame 0): after a
// sample's last step the engine calls FinishLatent with the sample's conditioning and its
// final latent [T, C, H, W], which it changes in place, so the final latent carries those
// values as the reference pipeline's does.
type LatentFinisher interface {
	FinishLatent(cond Conditioning, latent *tensor.Dense) error
}
