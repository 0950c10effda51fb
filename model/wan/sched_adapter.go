package wan

import "github.com/vdpp/vdpp/sched"

// vectorScheduler is a flow scheduler in its step-indexed form (sched.UniPC,
// sched.FlowMatchEuler).
type vectorScheduler interface {
	NumSteps() int
	Sigma(step int) float32
	Timestep(step int) float32
	InitSigma() float32
	ScaleModelInput(dst, x []float32, step int) error
	UpdateVectors(dst, modelOut, x []float32, step int, prev map[string][]float32) (map[string][]float32, error)
}

// stepIndexed adapts a vectorScheduler to sched.Scheduler: its state vectors are the
// engine's State.
type stepIndexed struct{ vectorScheduler }

func (s stepIndexed) Update(dst, modelOut, x []float32, step int, prev sched.State) (sched.State, error) {
	v, err := s.UpdateVectors(dst, modelOut, x, step, prev)
	return sched.State(v), err
}

func asScheduler(v vectorScheduler) sched.Scheduler { return stepIndexed{v} }
