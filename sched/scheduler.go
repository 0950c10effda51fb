package sched

import "fmt"

// Scheduler is what the engine's denoising step needs from a noise scheduler: the
// schedule (noise level and model timestep of every step, the scale of the initial
// noise), the model-input scaling and the update from one step's model output to the
// next latent. Euler implements it; multistep solvers (UniPC) keep the previous model
// outputs they need in a State that the engine hands from step to step, and from stage
// to stage with the latent, so a solver cut across processes computes the same bits as
// one process.
//
// Implementations are immutable after construction and safe for concurrent use: all
// per-item memory lives in the State.
type Scheduler interface {
	// NumSteps is the number of inference steps.
	NumSteps() int
	// Sigma is the noise level of step (0 <= step < NumSteps) and Timestep the value the
	// denoiser is conditioned on at that step.
	Sigma(step int) float32
	Timestep(step int) float32
	// InitSigma scales unit Gaussian noise into the initial latent (init_noise_sigma).
	InitSigma() float32
	// ScaleModelInput writes the model input for latent x at step into dst (dst may
	// alias x).
	ScaleModelInput(dst, x []float32, step int) error
	// Update writes the latent after step into dst from the (guided) model output and
	// the latent x, given the state the previous step returned (nil before step 0), and
	// returns the state for the next step (nil for a one-step solver). dst may alias x or
	// modelOut. The engine reuses modelOut's and x's memory after the call: an
	// implementation copies what it keeps, and never modifies prev (it returns a new
	// State instead), so a caller may keep a state to replay a step.
	Update(dst, modelOut, x []float32, step int, prev State) (State, error)
}

// State is a scheduler's memory of one work item between steps, such as a multistep
// solver's previous model outputs. It is opaque to the engine, which only carries it:
// every value is elementwise over the item's latent (the same length and row-major
// layout as x), so the engine can serialise it next to the latent and drop or regroup
// rows of an item along with the latent's rows. nil is the empty state.
type State map[string][]float32

// Clone returns a deep copy of s (nil for nil).
func (s State) Clone() State {
	if s == nil {
		return nil
	}
	out := make(State, len(s))
	for k, v := range s {
		out[k] = append([]float32(nil), v...)
	}
	return out
}

// Check reports a value whose length is not n, the latent's element count.
func (s State) Check(n int) error {
	for k, v := range s {
		if len(v) != n {
			return fmt.Errorf("sched: state %q holds %d values for a latent of %d", k, len(v), n)
		}
	}
	return nil
}

var _ Scheduler = (*Euler)(nil)

// Sigma implements Scheduler.
func (e *Euler) Sigma(step int) float32 { return e.Sigmas[step] }

// Timestep implements Scheduler.
func (e *Euler) Timestep(step int) float32 { return e.Timesteps[step] }

// InitSigma implements Scheduler: the InitNoiseSigma field.
func (e *Euler) InitSigma() float32 { return e.InitNoiseSigma }

// Update implements Scheduler with Step; Euler keeps no state (it returns nil).
func (e *Euler) Update(dst, modelOut, x []float32, step int, _ State) (State, error) {
	return nil, e.Step(dst, modelOut, x, step)
}

// Rows returns a copy of rows [lo, hi) of a state over an item of n rows (each value is
// cut as the latent is: row-major, len/n elements per row).
func (s State) Rows(n, lo, hi int) State {
	if s == nil {
		return nil
	}
	out := make(State, len(s))
	for k, v := range s {
		per := len(v) / n
		out[k] = append([]float32(nil), v[lo*per:hi*per]...)
	}
	return out
}

// StackRows joins the states of items into the state of one item holding their rows in
// order. All nil gives nil; the states must have the same names.
func StackRows(parts []State) (State, error) {
	var out State
	for i, p := range parts {
		if (p == nil) != (parts[0] == nil) || len(p) != len(parts[0]) {
			return nil, fmt.Errorf("sched: state %d has %d values, state 0 has %d", i, len(p), len(parts[0]))
		}
		for k, v := range p {
			if _, ok := parts[0][k]; !ok {
				return nil, fmt.Errorf("sched: state %d has %q, state 0 does not", i, k)
			}
			if out == nil {
				out = State{}
			}
			out[k] = append(out[k], v...)
		}
	}
	return out, nil
}
