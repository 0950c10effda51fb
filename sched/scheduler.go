package sched

import (
	"fmt"
	"math"
)

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
	// the latent x, given the state the previous step returned (empty before step 0), and
	// returns the state for the next step (empty for a one-step solver). dst may alias x or
	// modelOut. The engine reuses modelOut's and x's memory after the call: an
	// implementation copies what it keeps, and never modifies prev (it returns a new
	// State instead), so a caller may keep a state to replay a step.
	Update(dst, modelOut, x []float32, step int, prev State) (State, error)
}

// State is a scheduler's memory of one work item between steps, such as a multistep
// solver's previous model outputs. It is opaque to the engine, which only carries it with
// the latent (serialised next to it in a hand-off) and regroups it with the item's rows.
// The zero State is the empty state.
type State struct {
	// Latent holds values elementwise over the item's latent (the same length and
	// row-major layout as x): previous model outputs, the last sample. The engine cuts
	// them by rows as it cuts the latent.
	Latent map[string][]float32
	// Shared holds values that are the same for every row of the item (step counters,
	// history timesteps): they depend only on the steps taken, so items at the same step
	// share them.
	Shared map[string][]float32
	// PerRow holds a few values per row of the item, the same count for every row (the
	// noise key of a scheduler that draws noise: the run's seed and the row's sample id).
	// The engine cuts and joins them by rows as it does the latent.
	PerRow map[string][]float32
}

// Empty reports whether s holds nothing.
func (s State) Empty() bool { return len(s.Latent) == 0 && len(s.Shared) == 0 && len(s.PerRow) == 0 }

// Clone returns a deep copy of s.
func (s State) Clone() State {
	return State{Latent: cloneValues(s.Latent), Shared: cloneValues(s.Shared), PerRow: cloneValues(s.PerRow)}
}

func cloneValues(m map[string][]float32) map[string][]float32 {
	if m == nil {
		return nil
	}
	out := make(map[string][]float32, len(m))
	for k, v := range m {
		out[k] = append([]float32(nil), v...)
	}
	return out
}

// Check reports a Latent value whose length is not n, the latent's element count.
func (s State) Check(n int) error {
	for k, v := range s.Latent {
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

// Update implements Scheduler with Step; Euler keeps no state (it returns the empty State).
func (e *Euler) Update(dst, modelOut, x []float32, step int, _ State) (State, error) {
	return State{}, e.Step(dst, modelOut, x, step)
}

// Rows returns a copy of rows [lo, hi) of a state over an item of n rows: each Latent and
// PerRow value cut as the latent is (row-major, len/n elements per row), the Shared values
// whole.
func (s State) Rows(n, lo, hi int) State {
	return State{Shared: cloneValues(s.Shared), Latent: cutRows(s.Latent, n, lo, hi), PerRow: cutRows(s.PerRow, n, lo, hi)}
}

func cutRows(m map[string][]float32, n, lo, hi int) map[string][]float32 {
	if m == nil {
		return nil
	}
	out := make(map[string][]float32, len(m))
	for k, v := range m {
		per := len(v) / n
		out[k] = append([]float32(nil), v[lo*per:hi*per]...)
	}
	return out
}

// StackRows joins the states of items at the same step into the state of one item
// holding their rows in order: Latent and PerRow values concatenated, Shared values taken
// from the first (they must be equal in all). The states must have the same names.
func StackRows(parts []State) (State, error) {
	if len(parts) == 0 {
		return State{}, nil
	}
	first := parts[0]
	out := State{Shared: cloneValues(first.Shared)}
	for i, p := range parts {
		if len(p.Latent) != len(first.Latent) || len(p.Shared) != len(first.Shared) || len(p.PerRow) != len(first.PerRow) {
			return State{}, fmt.Errorf("sched: state %d has %d+%d+%d values, state 0 has %d+%d+%d", i, len(p.Latent), len(p.Shared), len(p.PerRow), len(first.Latent), len(first.Shared), len(first.PerRow))
		}
		for k, v := range p.Shared {
			if w, ok := first.Shared[k]; !ok || !sameBits(v, w) {
				return State{}, fmt.Errorf("sched: state %d: shared value %q differs from state 0's", i, k)
			}
		}
		for k, v := range p.Latent {
			if _, ok := first.Latent[k]; !ok {
				return State{}, fmt.Errorf("sched: state %d has %q, state 0 does not", i, k)
			}
			if out.Latent == nil {
				out.Latent = map[string][]float32{}
			}
			out.Latent[k] = append(out.Latent[k], v...)
		}
		for k, v := range p.PerRow {
			if _, ok := first.PerRow[k]; !ok {
				return State{}, fmt.Errorf("sched: state %d has %q, state 0 does not", i, k)
			}
			if out.PerRow == nil {
				out.PerRow = map[string][]float32{}
			}
			out.PerRow[k] = append(out.PerRow[k], v...)
		}
	}
	return out, nil
}

// sameBits reports whether a and b hold the same float32 bits (NaN equals NaN).
func sameBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}
