package sched

import (
	"fmt"
	"math"
	"slices"
)

// FlowLCM is the sampler the step- and CFG-distilled Wan LoRAs (lightx2v's
// StepDistill-CfgDistill releases) were trained for: at every step the model's flow output
// gives the clean estimate x̂0 = x − σ·v, and the next latent is x̂0 noised afresh to the
// next noise level, (1 − σ_next)·x̂0 + σ_next·ε (the last step returns x̂0). It is diffusers'
// FlowMatchLCMScheduler (v0.35.2) after set_timesteps(sigmas=[1 − k/n for k < n]) with
// shift = the flow shift: the unshifted levels 1, 1 − 1/n, ..., 1/n are lightx2v's
// denoising_step_list (1000, 750, 500, 250 for n = 4, with sample_shift 5 in its configs),
// shifted as shift·s / (1 + (shift − 1)·s); the model timestep is σ·1000.
//
// It is immutable and safe for concurrent use. Update draws each row's noise from the row's
// noise key (see Stochastic, InitialState); StepNoise takes the noise explicitly.
type FlowLCM struct {
	shift     float64
	timesteps []float32
	sigmas    []float32
}

var _ Stochastic = (*FlowLCM)(nil)

// NewFlowLCM returns the schedule of numSteps steps for a model trained on numTrain
// timesteps, with the given flow shift (> 0).
func NewFlowLCM(numTrain int, shift float64, numSteps int) (*FlowLCM, error) {
	switch {
	case numTrain < 2 || numTrain > maxTrainTimesteps:
		return nil, fmt.Errorf("sched: LCM num_train_timesteps must be in [2, %d], got %d", maxTrainTimesteps, numTrain)
	case !(shift > 0) || math.IsInf(shift, 0):
		return nil, fmt.Errorf("sched: LCM flow shift must be > 0, got %v", shift)
	case numSteps < 1 || numSteps > numTrain:
		return nil, fmt.Errorf("sched: LCM num_inference_steps must be in [1, %d], got %d", numTrain, numSteps)
	}
	f := &FlowLCM{shift: shift, timesteps: make([]float32, numSteps), sigmas: make([]float32, numSteps+1)}
	// numpy float32 arithmetic with the Python-float shift cast to float32 (value-based
	// casting), then torch's float32 σ·T.
	a, b := float32(shift), float32(shift-1)
	for k := range numSteps {
		s := float32(1 - float64(k)/float64(numSteps))
		f.sigmas[k] = float32(a*s) / (1 + float32(b*s))
		f.timesteps[k] = f.sigmas[k] * float32(numTrain)
	}
	return f, nil
}

// Shift returns the flow shift.
func (f *FlowLCM) Shift() float64 { return f.shift }

// Timesteps returns the float32 model timesteps.
func (f *FlowLCM) Timesteps() []float32 { return slices.Clone(f.timesteps) }

// Sigmas returns the NumSteps()+1 float32 sigmas; the last is 0.
func (f *FlowLCM) Sigmas() []float32 { return slices.Clone(f.sigmas) }

// DrawsNoise implements Stochastic.
func (f *FlowLCM) DrawsNoise() bool { return true }

// NumSteps implements Scheduler.
func (f *FlowLCM) NumSteps() int { return len(f.timesteps) }

// Sigma implements Scheduler (NumSteps gives the final 0).
func (f *FlowLCM) Sigma(step int) float32 { return f.sigmas[step] }

// Timestep implements Scheduler.
func (f *FlowLCM) Timestep(step int) float32 { return f.timesteps[step] }

// InitSigma implements Scheduler: 1, flow models start from unit Gaussian noise.
func (f *FlowLCM) InitSigma() float32 { return 1 }

// ScaleModelInput implements Scheduler: a copy (the input is not scaled).
func (f *FlowLCM) ScaleModelInput(dst, x []float32, _ int) error {
	if len(dst) != len(x) {
		return fmt.Errorf("sched: LCM scale_model_input: dst has %d values, x %d", len(dst), len(x))
	}
	copy(dst, x)
	return nil
}

// StepNoise writes the LCM update of step into dst from the flow output, the latent x and
// the unit Gaussian noise, rounded like diffusers' float32 step. dst may alias any input.
func (f *FlowLCM) StepNoise(dst, modelOut, x, noise []float32, step int) error {
	if step < 0 || step >= len(f.timesteps) {
		return fmt.Errorf("sched: LCM step %d outside [0, %d)", step, len(f.timesteps))
	}
	if len(dst) != len(x) || len(modelOut) != len(x) || len(noise) != len(x) {
		return fmt.Errorf("sched: LCM step: lengths %d, %d, %d, %d differ", len(dst), len(modelOut), len(x), len(noise))
	}
	s, next := f.sigmas[step], f.sigmas[step+1]
	keep := 1 - next
	for i, v := range modelOut {
		x0 := x[i] - float32(s*v)
		dst[i] = float32(keep*x0) + float32(next*noise[i])
	}
	return nil
}

// Update implements Scheduler: StepNoise with each row's step noise drawn from its noise key
// in prev (InitialState), which the returned state carries on. The last step adds no noise
// and draws none.
func (f *FlowLCM) Update(dst, modelOut, x []float32, step int, prev State) (State, error) {
	var noise []float32
	if step == len(f.timesteps)-1 {
		noise = make([]float32, len(x)) // σ_next = 0: the noise is multiplied by 0
	} else {
		var err error
		if noise, err = rowNoise(prev, len(x), step); err != nil {
			return State{}, fmt.Errorf("sched: LCM step %d: %w", step, err)
		}
	}
	if err := f.StepNoise(dst, modelOut, x, noise, step); err != nil {
		return State{}, err
	}
	return State{PerRow: prev.PerRow}, nil
}
