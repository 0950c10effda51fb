package sched

import (
	"fmt"
)

// Euler is diffusers' EulerDiscreteScheduler after set_timesteps(numSteps), with
// s_churn = 0 (no noise is ever drawn). It is immutable after New and safe for
// concurrent use; the step index is passed explicitly instead of being tracked.
type Euler struct {
	// Config is the validated configuration the schedule was built from.
	Config Config
	// Sigmas holds numSteps+1 float32 noise levels; the last is the final sigma (0 for
	// final_sigmas_type "zero").
	Sigmas []float32
	// Timesteps holds the numSteps float32 values passed to the denoiser.
	Timesteps []float32
	// InitNoiseSigma scales unit Gaussian noise into the initial latent.
	InitNoiseSigma float32
	pred           predKind
}

type predKind int

const (
	predEpsilon predKind = iota
	predV
	predSample
)

// New validates cfg and computes the schedule for numSteps inference steps.
func New(cfg Config, numSteps int) (*Euler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if numSteps < 1 {
		return nil, fmt.Errorf("sched: num_inference_steps must be >= 1, got %d", numSteps)
	}
	if numSteps > cfg.NumTrainTimesteps {
		return nil, fmt.Errorf("sched: num_inference_steps %d exceeds num_train_timesteps %d", numSteps, cfg.NumTrainTimesteps)
	}
	e := &Euler{Config: cfg}
	e.Sigmas, e.Timesteps = schedule(cfg, numSteps)
	e.InitNoiseSigma = initNoiseSigma(cfg, e.Sigmas)
	switch cfg.PredictionType {
	case PredEpsilon:
		e.pred = predEpsilon
	case PredVPrediction:
		e.pred = predV
	default:
		e.pred = predSample
	}
	return e, nil
}

// NumSteps returns the number of inference steps.
func (e *Euler) NumSteps() int { return len(e.Timesteps) }

func (e *Euler) check(step int, n int, lens ...int) error {
	if step < 0 || step >= len(e.Timesteps) {
		return fmt.Errorf("sched: step %d out of range [0,%d)", step, len(e.Timesteps))
	}
	for _, l := range lens {
		if l != n {
			return fmt.Errorf("sched: length mismatch: %d vs %d elements", l, n)
		}
	}
	return nil
}

// ScaleModelInput writes x / √(σ_step² + 1) into dst (EDM c_in), in float32 like
// diffusers' scale_model_input. dst may alias x.
func (e *Euler) ScaleModelInput(dst, x []float32, step int) error {
	if err := e.check(step, len(x), len(dst)); err != nil {
		return err
	}
	s := e.Sigmas[step]
	c := sqrt32(float32(s*s) + 1)
	for i, v := range x {
		dst[i] = v / c
	}
	return nil
}

// PredOriginal writes the denoised estimate x̂0 for step into dst (the
// pred_original_sample of diffusers' step). dst may alias modelOut or x.
func (e *Euler) PredOriginal(dst, modelOut, x []float32, step int) error {
	if err := e.check(step, len(x), len(dst), len(modelOut)); err != nil {
		return err
	}
	s := e.Sigmas[step]
	switch e.pred {
	case predV:
		s2p1 := float32(s*s) + 1
		cOut := -s / sqrt32(s2p1)
		for i, v := range modelOut {
			dst[i] = float32(v*cOut) + x[i]/s2p1
		}
	case predEpsilon:
		for i, v := range modelOut {
			dst[i] = x[i] - float32(s*v)
		}
	default:
		copy(dst, modelOut)
	}
	return nil
}

// Step writes the Euler update for step into dst: x̂0 as in PredOriginal, then
// d = (x − x̂0)/σ and x_next = x + d·(σ_next − σ), every operation rounded to float32 in
// the order of diffusers' EulerDiscreteScheduler.step, so the result is
// bit-identical to torch's. dst may alias modelOut or x. It does not allocate.
func (e *Euler) Step(dst, modelOut, x []float32, step int) error {
	if err := e.check(step, len(x), len(dst), len(modelOut)); err != nil {
		return err
	}
	s, sNext := e.Sigmas[step], e.Sigmas[step+1]
	dt := sNext - s
	switch e.pred {
	case predV:
		s2p1 := float32(s*s) + 1
		cOut := -s / sqrt32(s2p1)
		for i, v := range modelOut {
			xi := x[i]
			x0 := float32(v*cOut) + xi/s2p1
			d := (xi - x0) / s
			dst[i] = xi + float32(d*dt)
		}
	case predEpsilon:
		for i, v := range modelOut {
			xi := x[i]
			x0 := xi - float32(s*v)
			d := (xi - x0) / s
			dst[i] = xi + float32(d*dt)
		}
	default:
		for i, v := range modelOut {
			xi := x[i]
			d := (xi - v) / s
			dst[i] = xi + float32(d*dt)
		}
	}
	return nil
}
