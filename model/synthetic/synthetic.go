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
	"math"
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

// Cache state names of the synthetic model's step cache.
const (
	cacheInput    = "input"    // the row's input at its last computed call
	cacheResidual = "residual" // that call's output minus its input
)

// ReuseCost is what a call that reuses its cache costs, as a fraction of a full call: the
// synthetic stand-in for a network's first block and output head.
const ReuseCost = 0.125

var (
	_ model.StepCacher      = (*Denoiser)(nil)
	_ model.FrameStepCacher = (*Denoiser)(nil)
)

// PredictCached implements model.StepCacher with a first-block-style rule on the input:
// a row computes when it has no state, when asked to, or (model.CacheAuto) when its input
// moved by more than c.Threshold relative to the input of its last computed call
// (sum|x - x_prev| / sum|x_prev|); otherwise it returns its input plus the residual
// (output minus input) of that call, at ReuseCost of a full row (c.Work).
func (d *Denoiser) PredictCached(ctx context.Context, in model.Input, c *model.CacheCall) (*tensor.Dense, error) {
	return d.predictCached(ctx, in, model.FramePart{}, c)
}

// PredictFramesCached implements model.FrameStepCacher: each member holds its frames'
// state; the indicator's per-frame sums are all-gathered, so every member adds the same
// numbers in the same order (frame by frame, as one rank does) and takes the same decision.
func (d *Denoiser) PredictFramesCached(ctx context.Context, in model.Input, part model.FramePart, c *model.CacheCall) (*tensor.Dense, error) {
	if part.Comm == nil {
		return nil, fmt.Errorf("synthetic: PredictFramesCached without a group")
	}
	return d.predictCached(ctx, in, part, c)
}

func (d *Denoiser) predictCached(ctx context.Context, in model.Input, part model.FramePart, c *model.CacheCall) (*tensor.Dense, error) {
	if err := in.Validate(); err != nil {
		return nil, fmt.Errorf("synthetic: %w", err)
	}
	rows := in.Rows()
	if len(c.Rows) != rows {
		return nil, fmt.Errorf("synthetic: %d cache rows for %d input rows", len(c.Rows), rows)
	}
	full, err := d.Predict(ctx, in)
	if err != nil {
		return nil, err
	}
	frames := in.Latents.Shape[1]
	per := in.Latents.Len() / rows
	// Per row and local frame: sum|x - x_prev| and sum|x_prev|.
	sums := tensor.New(rows, frames, 2)
	for r, cr := range c.Rows {
		if prev := cr.State[cacheInput]; prev != nil && prev.Len() == per {
			model.ChangeSums(sums.Data[r*frames*2:(r+1)*frames*2], in.Latents.Data[r*per:(r+1)*per], prev.Data, frames)
		}
	}
	all := []*tensor.Dense{sums}
	if part.Comm != nil {
		if all, err = part.Comm.AllGather(ctx, sums); err != nil {
			return nil, fmt.Errorf("synthetic: cache indicator: %w", err)
		}
	}
	out := tensor.New(in.Latents.Shape...)
	c.Work = 0
	for r := range c.Rows {
		cr := &c.Rows[r]
		x := in.Latents.Data[r*per : (r+1)*per]
		o := out.Data[r*per : (r+1)*per]
		cr.Value = math.NaN()
		has := cr.State[cacheInput] != nil && cr.State[cacheInput].Len() == per && cr.State[cacheResidual] != nil
		if has {
			if cr.Value, err = model.ChangeOf(all, r); err != nil {
				return nil, fmt.Errorf("synthetic: %w", err)
			}
		}
		compute := !has || cr.Decision == model.CacheCompute || (cr.Decision == model.CacheAuto && !(cr.Value <= c.Threshold))
		cr.Computed = compute
		if !compute {
			res := cr.State[cacheResidual].Data
			for i := range o {
				o[i] = x[i] + res[i]
			}
			c.Work += ReuseCost
			continue
		}
		copy(o, full.Data[r*per:(r+1)*per])
		res := tensor.New(per)
		for i := range o {
			res.Data[i] = o[i] - x[i]
		}
		cr.State = model.CacheState{cacheInput: &tensor.Dense{Shape: []int{per}, Data: append([]float32(nil), x...)}, cacheResidual: res}
		c.Work++
	}
	return out, nil
}
