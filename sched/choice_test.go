package sched

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

// The schedulers added for scheduler choice, built as the families build them.
func choiceSchedulers(t *testing.T, steps int) map[string]Scheduler {
	t.Helper()
	flowDPM, err := NewFlowDPM(FlowDPMConfig(1000, 3), steps)
	if err != nil {
		t.Fatal(err)
	}
	edm, err := NewEDMDPM(SVDDPMConfig(DefaultSVDConfig()), steps)
	if err != nil {
		t.Fatal(err)
	}
	anc, err := NewEulerAncestral(DefaultSVDConfig(), steps)
	if err != nil {
		t.Fatal(err)
	}
	lcm, err := NewFlowLCM(1000, 5, steps)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]Scheduler{"flow dpm": flowDPM, "edm dpm": edm, "euler-a": anc, "lcm": lcm}
}

func randVec(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

// run steps an item of rows through every step with Update, the state carried from step to
// step as the engine carries it, and returns the final latent.
func run(t *testing.T, sc Scheduler, x []float32, outs [][]float32, st State) []float32 {
	t.Helper()
	x = append([]float32(nil), x...)
	for k := range sc.NumSteps() {
		var err error
		if st, err = sc.Update(x, outs[k], x, k, st); err != nil {
			t.Fatalf("step %d: %v", k, err)
		}
	}
	return x
}

// TestChoiceRowsIndependent: an item of three rows steps to the same bits as its rows stepped
// as separate items (a stage cut that regroups rows, or a server batching jobs, changes
// nothing), for each scheduler, with the noise keyed by (seed, sample).
func TestChoiceRowsIndependent(t *testing.T) {
	const steps, per = 5, 12
	samples := []int64{7, 3, 11}
	r := rand.New(rand.NewPCG(1, 2))
	x := randVec(r, per*len(samples))
	outs := make([][]float32, steps)
	for k := range outs {
		outs[k] = randVec(r, len(x))
	}
	for name, sc := range choiceSchedulers(t, steps) {
		t.Run(name, func(t *testing.T) {
			whole := run(t, sc, x, outs, InitialState(sc, 42, samples))
			for i, s := range samples {
				rowOuts := make([][]float32, steps)
				for k := range outs {
					rowOuts[k] = outs[k][i*per : (i+1)*per]
				}
				got := run(t, sc, x[i*per:(i+1)*per], rowOuts, InitialState(sc, 42, []int64{s}))
				if !reflect.DeepEqual(got, whole[i*per:(i+1)*per]) {
					t.Fatalf("row %d (sample %d) alone differs from the row in the item", i, s)
				}
			}
			// A different seed changes a stochastic scheduler's result, and nothing else's.
			other := run(t, sc, x, outs, InitialState(sc, 43, samples))
			if _, noisy := sc.(Stochastic); noisy == reflect.DeepEqual(other, whole) {
				t.Fatalf("seed 43 vs 42: equal %v for a scheduler that draws noise: %v", reflect.DeepEqual(other, whole), noisy)
			}
		})
	}
}

// TestChoiceStateCuts: the state cut between any two steps, cut into rows and joined again
// (as a hand-off between stages regroups it), continues with the same bits.
func TestChoiceStateCuts(t *testing.T) {
	const steps, per = 6, 8
	samples := []int64{0, 1}
	r := rand.New(rand.NewPCG(3, 4))
	x := randVec(r, per*len(samples))
	outs := make([][]float32, steps)
	for k := range outs {
		outs[k] = randVec(r, len(x))
	}
	for name, sc := range choiceSchedulers(t, steps) {
		t.Run(name, func(t *testing.T) {
			want := run(t, sc, x, outs, InitialState(sc, 9, samples))
			for cut := 1; cut < steps; cut++ {
				cur := append([]float32(nil), x...)
				st := InitialState(sc, 9, samples)
				for k := range steps {
					if k == cut {
						st, _ = StackRows([]State{st.Rows(2, 0, 1), st.Rows(2, 1, 2)})
						st = st.Clone()
					}
					var err error
					if st, err = sc.Update(cur, outs[k], cur, k, st); err != nil {
						t.Fatal(err)
					}
				}
				if !reflect.DeepEqual(cur, want) {
					t.Fatalf("cut before step %d changes the result", cut)
				}
			}
		})
	}
}

// A scheduler that draws noise refuses a state without noise keys (one the engine did not
// start with InitialState) instead of drawing unkeyed noise.
func TestStochasticNeedsKeys(t *testing.T) {
	for name, sc := range choiceSchedulers(t, 3) {
		x := make([]float32, 4)
		_, err := sc.Update(x, x, x, 0, State{})
		if _, noisy := sc.(Stochastic); noisy != (err != nil) {
			t.Errorf("%s: Update without keys: %v", name, err)
		}
	}
	if st := InitialState(&Euler{}, 1, []int64{0}); !st.Empty() {
		t.Fatalf("InitialState of Euler = %v, want empty", st)
	}
}

func TestNoiseKeys(t *testing.T) {
	lcm, err := NewFlowLCM(1000, 5, 4)
	if err != nil {
		t.Fatal(err)
	}
	keys := []NoiseKey{{Seed: math.MaxInt64, Sample: 0}, {Seed: -1, Sample: 1 << 40}, {Seed: 0, Sample: 12}}
	st := InitialState(lcm, keys[0].Seed, []int64{keys[0].Sample})
	for _, k := range keys[1:] {
		st, err = StackRows([]State{st, InitialState(lcm, k.Seed, []int64{k.Sample})})
		if err != nil {
			t.Fatal(err)
		}
	}
	got, err := NoiseKeys(st, 3)
	if err != nil || !reflect.DeepEqual(got, keys) {
		t.Fatalf("NoiseKeys = %v, %v; want %v", got, err, keys)
	}
	if _, err := NoiseKeys(st, 2); err == nil {
		t.Fatal("keys of 3 rows read as 2")
	}
	a, b := make([]float32, 5), make([]float32, 5)
	StepNoise(a, keys[2], 1)
	StepNoise(b, keys[2], 2)
	if reflect.DeepEqual(a, b) {
		t.Fatal("steps 1 and 2 draw the same noise")
	}
	StepNoise(b, keys[2], 1)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("StepNoise is not deterministic")
	}
}

// The flow LCM schedule is lightx2v's 4-step list 1000, 750, 500, 250 shifted by 5.
func TestFlowLCMSchedule(t *testing.T) {
	f, err := NewFlowLCM(1000, 5, 4)
	if err != nil {
		t.Fatal(err)
	}
	want := []float32{1000, 937.5, 833.3333, 625}
	for i, w := range want {
		if math.Abs(float64(f.Timestep(i)-w)) > 1e-3 {
			t.Fatalf("timesteps %v, want %v", f.Timesteps(), want)
		}
	}
	if f.Sigma(4) != 0 || f.InitSigma() != 1 {
		t.Fatalf("final sigma %v, init sigma %v", f.Sigma(4), f.InitSigma())
	}
	for _, bad := range []struct {
		train int
		shift float64
		n     int
	}{{1000, 0, 4}, {1000, math.Inf(1), 4}, {1000, 5, 0}, {10, 5, 11}, {1, 5, 1}} {
		if _, err := NewFlowLCM(bad.train, bad.shift, bad.n); err == nil {
			t.Errorf("NewFlowLCM(%d, %v, %d) accepted", bad.train, bad.shift, bad.n)
		}
	}
}

// Settings DPMSolver does not implement are refused, never run differently.
func TestDPMConfigRefuses(t *testing.T) {
	for _, js := range []string{
		`{"prediction_type": "epsilon"}`,
		`{"prediction_type": "flow_prediction", "use_flow_sigmas": true, "solver_order": 3}`,
		`{"prediction_type": "flow_prediction", "use_flow_sigmas": true, "algorithm_type": "sde-dpmsolver++"}`,
		`{"prediction_type": "flow_prediction", "use_flow_sigmas": true, "final_sigmas_type": "sigma_min"}`,
		`{"prediction_type": "flow_prediction", "use_flow_sigmas": true, "use_karras_sigmas": true}`,
		`{"prediction_type": "flow_prediction", "use_flow_sigmas": true, "flow_shift": -1}`,
	} {
		if _, err := ParseDPMConfig([]byte(js)); err == nil {
			t.Errorf("ParseDPMConfig(%s) accepted", js)
		}
	}
	if c, err := ParseDPMConfig([]byte(`{"prediction_type": "flow_prediction", "use_flow_sigmas": true, "solver_type": "bh2"}`)); err != nil || c.SolverType != "midpoint" {
		t.Errorf("bh2 solver type: %+v, %v (diffusers registers it as midpoint)", c, err)
	}
	for _, js := range []string{`{"sigma_schedule": "exponential"}`, `{"sigma_min": 5, "sigma_max": 1}`, `{"prediction_type": "sample"}`} {
		if _, err := ParseEDMDPMConfig([]byte(js)); err == nil {
			t.Errorf("ParseEDMDPMConfig(%s) accepted", js)
		}
	}
}
