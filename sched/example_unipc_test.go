package sched_test

import (
	"fmt"
	"math"

	"github.com/vdpp/vdpp/sched"
)

// ExampleUniPC runs Wan 2.2's UniPC schedule with a stand-in denoiser, cutting the run
// after three steps: the state travels as bytes to a scheduler built afresh (as another
// pipeline stage would) and the run continues with the same bits.
func ExampleUniPC() {
	cfg, err := sched.ParseUniPCConfig([]byte(`{"prediction_type": "flow_prediction", "use_flow_sigmas": true,
		"flow_shift": 3.0, "solver_order": 2, "solver_type": "bh2", "final_sigmas_type": "zero"}`))
	if err != nil {
		panic(err)
	}
	u, err := sched.NewUniPC(cfg, 6)
	if err != nil {
		panic(err)
	}
	fmt.Println("timesteps", u.Timesteps())
	denoise := func(x []float32, t float32) []float32 { // stand-in for the transformer
		v := make([]float32, len(x))
		for i := range x {
			v[i] = x[i] - 0.5 + t/2000
		}
		return v
	}
	x := []float32{1, -0.5, 0.25}
	st := u.NewState()
	for i, t := range u.Timesteps() {
		if i == 3 { // hand the state to the next stage
			b, err := st.MarshalBinary()
			if err != nil {
				panic(err)
			}
			st = new(sched.UniPCState)
			if err := st.UnmarshalBinary(b); err != nil {
				panic(err)
			}
			if u, err = sched.NewUniPC(cfg, 6); err != nil {
				panic(err)
			}
		}
		if x, err = u.Step(st, denoise(x, t), t, x); err != nil {
			panic(err)
		}
	}
	fmt.Printf("x0 %.4f %.4f %.4f\n", x[0], x[1], x[2])
	// Output:
	// timesteps [999 937 856 749 599 374]
	// x0 0.5041 0.0002 0.2521
}

// ExampleFlowMatchEuler builds the flow-match Euler schedule with a static shift.
func ExampleFlowMatchEuler() {
	cfg, err := sched.ParseFlowMatchConfig([]byte(`{"num_train_timesteps": 1000, "shift": 3.0}`))
	if err != nil {
		panic(err)
	}
	f, err := sched.NewFlowMatchEuler(cfg, 4, math.NaN())
	if err != nil {
		panic(err)
	}
	fmt.Println("sigmas", f.Sigmas())
	st := f.NewState()
	x, err := f.Step(st, []float32{1, -1}, f.Timesteps()[0], []float32{0.5, 0.5})
	if err != nil {
		panic(err)
	}
	fmt.Println("after one step", x, "next step", st.StepIndex)
	// Output:
	// sigmas [1 0.8576923 0.60215056 0.008928572 0]
	// after one step [0.3576923 0.6423077] next step 1
}
