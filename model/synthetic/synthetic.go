// Package synthetic is a stand-in denoiser for the simulator: a cheap, deterministic,
// elementwise update in place of the UNet plus a configurable per-step cost, so the engine
// can be measured at any grain without a real network.
//
// Contract: Predict returns out = x*a(t) + b*cond_c for conditioned rows and x*a(t) - b*u_c
// for unconditional rows (c is the channel, a(t) = 0.9 + 0.05*t), so guided and unguided
// runs differ and a wrong CFG combination is caught. Each call costs StepMS per row: the
// call returns no earlier than start + rows*StepMS, by sleeping to that deadline (the
// default, so many ranks on few cores do not fight for CPU) or by spinning (Cost "spin").
// The cost is a budget for the whole denoising step: the engine calls Pace (model.Paced)
// after the step, so its scheduler arithmetic is spent inside the budget, not on top of it.
// Row results never depend on the rest of the batch.
package synthetic

import (
	"context"
	"fmt"
	"time"

	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/tensor"
)

// CondKey is the conditioning entry the synthetic model reads: a vector with one value per
// latent channel.
const CondKey = "vec"

// Denoiser is the synthetic model.
type Denoiser struct {
	StepMS float64
	Spin   bool
	// SleepUntil blocks until the deadline; a field so tests can count instead of sleep.
	SleepUntil func(deadline time.Time)
	// Now is the clock (time.Now by default).
	Now func() time.Time
}

// New builds a synthetic denoiser from cfg.StepMS and cfg.Cost ("", "sleep" or "spin").
func New(cfg model.Config) (*Denoiser, error) {
	if cfg.StepMS < 0 {
		return nil, fmt.Errorf("synthetic: negative step cost %v ms", cfg.StepMS)
	}
	d := &Denoiser{StepMS: cfg.StepMS, Now: time.Now}
	switch cfg.Cost {
	case "", "sleep":
		d.SleepUntil = preciseSleepUntil
	case "spin":
		d.Spin = true
		d.SleepUntil = spinUntil
	default:
		return nil, fmt.Errorf("synthetic: unknown cost mode %q (want sleep or spin)", cfg.Cost)
	}
	return d, nil
}

// WeightBytes is 0: the synthetic model holds no weights.
func (d *Denoiser) WeightBytes() int64 { return 0 }

// Pace implements model.Paced: it returns no earlier than start + rows*StepMS.
func (d *Denoiser) Pace(start time.Time, rows float64) {
	if d.StepMS <= 0 {
		return
	}
	d.SleepUntil(start.Add(time.Duration(d.StepMS * rows * float64(time.Millisecond))))
}

// FrameLocal implements model.FrameLocal: the update is elementwise.
func (d *Denoiser) FrameLocal() bool { return true }

// PredictFrames implements model.ContextParallel: the update is elementwise, so a slice of
// frames is computed exactly as in the whole sample and nothing is exchanged.
func (d *Denoiser) PredictFrames(ctx context.Context, in model.Input, _ model.FramePart) (*tensor.Dense, error) {
	return d.Predict(ctx, in)
}

// Predict implements model.Denoiser. It does not spend the step's cost; Pace does.
func (d *Denoiser) Predict(ctx context.Context, in model.Input) (*tensor.Dense, error) {
	if err := in.Validate(); err != nil {
		return nil, fmt.Errorf("synthetic: %w", err)
	}
	rows, frames, channels := in.Latents.Shape[0], in.Latents.Shape[1], in.Latents.Shape[2]
	plane := in.Latents.Shape[3] * in.Latents.Shape[4]
	per := in.Latents.Len() / max(rows, 1)
	out := tensor.New(in.Latents.Shape...)
	a := 0.9 + 0.05*in.Timestep
	const b = float32(0.1)
	for r := 0; r < rows; r++ {
		vec, err := condVector(in.Cond[r], channels)
		if err != nil {
			return nil, fmt.Errorf("synthetic: row %d: %w", r, err)
		}
		sign := b
		if in.Uncond[r] {
			sign = -b
		}
		x := in.Latents.Data[r*per : (r+1)*per]
		o := out.Data[r*per : (r+1)*per]
		for f := 0; f < frames; f++ {
			for c := 0; c < channels; c++ {
				off := (f*channels + c) * plane
				add := sign * vec[c]
				xs, os := x[off:off+plane], o[off:off+plane]
				for i := range xs {
					os[i] = float32(xs[i]*a) + add // explicit rounding: no FMA fusion on any arch
				}
			}
		}
	}
	return out, ctx.Err()
}

// condVector returns the per-channel conditioning, or ones when the row has none.
func condVector(c model.Conditioning, channels int) ([]float32, error) {
	v, ok := c[CondKey]
	if !ok || v == nil {
		ones := make([]float32, channels)
		for i := range ones {
			ones[i] = 1
		}
		return ones, nil
	}
	if v.Len() != channels {
		return nil, fmt.Errorf("conditioning %q has %d values for %d channels", CondKey, v.Len(), channels)
	}
	return v.Data, nil
}

func spinUntil(deadline time.Time) {
	for time.Now().Before(deadline) {
	}
}
