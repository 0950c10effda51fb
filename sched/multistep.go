package sched

// The flow schedulers as Schedulers: their step-indexed forms (UpdateVectors) keep their
// memory as vectors elementwise over the latent, which is State.Latent.

var (
	_ Scheduler = (*UniPC)(nil)
	_ Scheduler = (*FlowMatchEuler)(nil)
)

// Update implements Scheduler with UpdateVectors: the model-output history and the last
// sample travel in State.Latent; the counters follow from step.
func (u *UniPC) Update(dst, modelOut, x []float32, step int, prev State) (State, error) {
	v, err := u.UpdateVectors(dst, modelOut, x, step, prev.Latent)
	if err != nil {
		return State{}, err
	}
	return State{Latent: v}, nil
}

// Update implements Scheduler with UpdateVectors (flow-match Euler keeps no state).
func (f *FlowMatchEuler) Update(dst, modelOut, x []float32, step int, prev State) (State, error) {
	v, err := f.UpdateVectors(dst, modelOut, x, step, prev.Latent)
	if err != nil {
		return State{}, err
	}
	return State{Latent: v}, nil
}
