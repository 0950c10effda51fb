package sched

import "fmt"

// EulerAncestral is diffusers' EulerAncestralDiscreteScheduler step (v0.35.2) on the
// schedule of an EulerDiscreteScheduler (Euler, from the same Config): each step moves to
// σ_down with the Euler derivative and adds σ_up of fresh noise, where
// σ_up = √(σ_to²·(σ_from² − σ_to²)/σ_from²) and σ_down = √(σ_to² − σ_up²). diffusers'
// ancestral scheduler builds its own schedule without Karras sigmas or continuous
// timesteps; Stable Video Diffusion's UNet needs both, so the schedule, the model input
// scaling and the initial noise scale are the Euler scheduler's.
//
// It is immutable and safe for concurrent use. Update draws each row's noise from the row's
// noise key (see Stochastic, InitialState); StepNoise takes the noise explicitly.
type EulerAncestral struct {
	e *Euler
}

var _ Stochastic = (*EulerAncestral)(nil)

// NewEulerAncestral validates cfg and computes the Euler schedule for numSteps steps.
func NewEulerAncestral(cfg Config, numSteps int) (*EulerAncestral, error) {
	if cfg.PredictionType != PredEpsilon && cfg.PredictionType != PredVPrediction {
		return nil, fmt.Errorf("%w: Euler ancestral prediction_type %q (epsilon or v_prediction)", ErrUnsupported, cfg.PredictionType)
	}
	e, err := New(cfg, numSteps)
	if err != nil {
		return nil, err
	}
	return &EulerAncestral{e: e}, nil
}

// Euler returns the Euler scheduler whose schedule the ancestral one steps on.
func (a *EulerAncestral) Euler() *Euler { return a.e }

// DrawsNoise implements Stochastic.
func (a *EulerAncestral) DrawsNoise() bool { return true }

// NumSteps implements Scheduler.
func (a *EulerAncestral) NumSteps() int { return a.e.NumSteps() }

// Sigma implements Scheduler.
func (a *EulerAncestral) Sigma(step int) float32 { return a.e.Sigmas[step] }

// Timestep implements Scheduler.
func (a *EulerAncestral) Timestep(step int) float32 { return a.e.Timesteps[step] }

// InitSigma implements Scheduler: the Euler scheduler's init_noise_sigma.
func (a *EulerAncestral) InitSigma() float32 { return a.e.InitNoiseSigma }

// ScaleModelInput implements Scheduler: x / √(σ² + 1), as Euler's.
func (a *EulerAncestral) ScaleModelInput(dst, x []float32, step int) error {
	return a.e.ScaleModelInput(dst, x, step)
}

// StepNoise writes the ancestral update of step into dst from the model output, the
// latent x and the unit Gaussian noise, every operation rounded to float32 in the order of
// diffusers' step. dst may alias any input.
func (a *EulerAncestral) StepNoise(dst, modelOut, x, noise []float32, step int) error {
	e := a.e
	if err := e.check(step, len(x), len(dst), len(modelOut), len(noise)); err != nil {
		return err
	}
	s, sTo := e.Sigmas[step], e.Sigmas[step+1]
	s2, to2 := float32(s*s), float32(sTo*sTo)
	up := sqrt32(float32(to2*float32(s2-to2)) / s2)
	down := sqrt32(to2 - float32(up*up))
	dt := down - s
	s2p1 := s2 + 1
	cOut := -s / sqrt32(s2p1)
	for i, v := range modelOut {
		xi := x[i]
		var x0 float32
		if e.pred == predV {
			x0 = float32(v*cOut) + xi/s2p1
		} else {
			x0 = xi - float32(s*v)
		}
		d := (xi - x0) / s
		prev := xi + float32(d*dt)
		dst[i] = prev + float32(noise[i]*up)
	}
	return nil
}

// Update implements Scheduler: StepNoise with each row's step noise drawn from its noise key
// in prev (InitialState), which the returned state carries on.
func (a *EulerAncestral) Update(dst, modelOut, x []float32, step int, prev State) (State, error) {
	noise, err := rowNoise(prev, len(x), step)
	if err != nil {
		return State{}, fmt.Errorf("sched: Euler ancestral step %d: %w", step, err)
	}
	if err := a.StepNoise(dst, modelOut, x, noise, step); err != nil {
		return State{}, err
	}
	return State{PerRow: prev.PerRow}, nil
}
