package sched

import (
	"fmt"
	"slices"
	"strconv"
)

// The step-indexed API below serves an engine that passes the step index with every call
// and carries a scheduler's memory as elementwise vectors beside the latent (so that rows
// can be split and regrouped with it). For a run that starts at step 0, UniPC's counters
// (step index, warm-up count, last order) are functions of the step index, so only the
// model-output history and the last sample travel.

// uniPCVectorX0 names the history entry k steps back (0 = the latest); uniPCVectorLast
// names the last sample.
const (
	uniPCVectorX0   = "unipc_x0_"
	uniPCVectorLast = "unipc_last_sample"
)

// Sigma returns the noise level of step (0 <= step < NumSteps; NumSteps gives the final).
func (u *UniPC) Sigma(step int) float32 { return u.sigmas[step] }

// Timestep returns the model timestep of step.
func (u *UniPC) Timestep(step int) float32 { return float32(u.timesteps[step]) }

// InitSigma is diffusers' init_noise_sigma for UniPC: 1.
func (u *UniPC) InitSigma() float32 { return 1 }

// ScaleModelInput copies x to dst: UniPC does not scale the model input.
func (u *UniPC) ScaleModelInput(dst, x []float32, _ int) error {
	if len(dst) != len(x) {
		return fmt.Errorf("sched: UniPC scale_model_input: dst has %d values, x %d", len(dst), len(x))
	}
	copy(dst, x)
	return nil
}

// thisOrderAt is the predictor order diffusers uses at step i of a run begun at step 0.
func (u *UniPC) thisOrderAt(i int) int {
	order := u.cfg.SolverOrder
	o := order
	if u.cfg.LowerOrderFinal {
		o = min(order, len(u.timesteps)-i)
	}
	return min(o, min(i, order)+1)
}

// StateAt rebuilds the state before step of a run that began at step 0 from the vectors
// Vectors returned after the previous step (nil or empty at step 0). The vectors are
// aliased, not copied; Step never writes into them.
func (u *UniPC) StateAt(step int, vectors map[string][]float32) (*UniPCState, error) {
	if step < 0 || step >= len(u.timesteps) {
		return nil, fmt.Errorf("sched: UniPC step %d outside [0, %d)", step, len(u.timesteps))
	}
	order := u.cfg.SolverOrder
	st := u.NewState()
	st.StepIndex = step
	st.LowerOrderNums = min(step, order)
	if step > 0 {
		st.ThisOrder = u.thisOrderAt(step - 1)
	}
	want := 0
	for k := range st.LowerOrderNums {
		v, ok := vectors[uniPCVectorX0+strconv.Itoa(k)]
		if !ok {
			return nil, fmt.Errorf("%w: UniPC step %d needs %s%d", ErrBadState, step, uniPCVectorX0, k)
		}
		st.ModelOutputs[order-1-k] = v
		st.HistoryTimesteps[order-1-k] = float32(u.timesteps[step-1-k])
		want++
	}
	if step > 0 {
		v, ok := vectors[uniPCVectorLast]
		if !ok {
			return nil, fmt.Errorf("%w: UniPC step %d needs %s", ErrBadState, step, uniPCVectorLast)
		}
		st.LastSample = v
		want++
	}
	if len(vectors) != want {
		return nil, fmt.Errorf("%w: UniPC step %d takes %d state vectors, got %d", ErrBadState, step, want, len(vectors))
	}
	return st, nil
}

// Vectors returns copies of the state's elementwise vectors (history and last sample) under
// the names StateAt reads; nil before the first step.
func (s *UniPCState) Vectors() map[string][]float32 {
	var out map[string][]float32
	put := func(name string, v []float32) {
		if out == nil {
			out = map[string][]float32{}
		}
		out[name] = slices.Clone(v)
	}
	n := len(s.ModelOutputs)
	for k := range n {
		if v := s.ModelOutputs[n-1-k]; v != nil {
			put(uniPCVectorX0+strconv.Itoa(k), v)
		}
	}
	if s.LastSample != nil {
		put(uniPCVectorLast, s.LastSample)
	}
	return out
}

// UpdateVectors is one step in the step-indexed form: it writes the sample after step into
// dst (which may alias x or modelOut) from the state vectors the previous step returned
// (nil at step 0) and returns the vectors for the next step. prev is not modified, and the
// result shares no memory with it, modelOut or x.
func (u *UniPC) UpdateVectors(dst, modelOut, x []float32, step int, prev map[string][]float32) (map[string][]float32, error) {
	if len(dst) != len(x) {
		return nil, fmt.Errorf("sched: UniPC update: dst has %d values, x %d", len(dst), len(x))
	}
	st, err := u.StateAt(step, prev)
	if err != nil {
		return nil, err
	}
	next, err := u.Step(st, modelOut, u.Timestep(step), x)
	if err != nil {
		return nil, err
	}
	copy(dst, next)
	return st.Vectors(), nil
}

// Sigma returns the noise level of step (NumSteps gives the final 0).
func (f *FlowMatchEuler) Sigma(step int) float32 { return f.sigmas[step] }

// Timestep returns the model timestep of step.
func (f *FlowMatchEuler) Timestep(step int) float32 { return f.timesteps[step] }

// InitSigma is 1: flow-matching pipelines start from unit Gaussian noise.
func (f *FlowMatchEuler) InitSigma() float32 { return 1 }

// ScaleModelInput copies x to dst: the flow-match scheduler does not scale the input.
func (f *FlowMatchEuler) ScaleModelInput(dst, x []float32, _ int) error {
	if len(dst) != len(x) {
		return fmt.Errorf("sched: flow-match scale_model_input: dst has %d values, x %d", len(dst), len(x))
	}
	copy(dst, x)
	return nil
}

// UpdateVectors is Step at an explicit step index (dst may alias x or modelOut); the
// scheduler keeps no vectors, so it returns nil.
func (f *FlowMatchEuler) UpdateVectors(dst, modelOut, x []float32, step int, _ map[string][]float32) (map[string][]float32, error) {
	if len(dst) != len(x) {
		return nil, fmt.Errorf("sched: flow-match update: dst has %d values, x %d", len(dst), len(x))
	}
	if step < 0 || step >= len(f.timesteps) {
		return nil, fmt.Errorf("sched: flow-match step %d outside [0, %d)", step, len(f.timesteps))
	}
	next, err := f.Step(&FlowMatchState{StepIndex: step}, modelOut, f.timesteps[step], x)
	if err != nil {
		return nil, err
	}
	copy(dst, next)
	return nil, nil
}
