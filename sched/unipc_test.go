package sched

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// wanUniPCConfig is the Wan 2.2 scheduler_config.json.
func wanUniPCConfig() UniPCConfig {
	c := DefaultUniPCConfig()
	c.PredictionType = PredFlow
	c.UseFlowSigmas = true
	c.FlowShift = 3
	return c
}

func randomVec(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

// stepFunc runs one step of some scheduler from a state it owns.
type stepFunc func(mo []float32, t float32, x []float32) ([]float32, error)

// resumable is a scheduler whose state can be exported and imported, as the pipeline
// hands it from stage to stage.
type resumable struct {
	name      string
	timesteps []float32
	// fresh returns a stepper with a new state; resume returns one whose state was
	// exported after the given stepper's steps and imported into a newly built scheduler.
	fresh  func(t *testing.T) (stepFunc, func() []byte)
	resume func(t *testing.T, state []byte) (stepFunc, func() []byte)
}

func uniPCResumable(t *testing.T, name string, cfg UniPCConfig, n int, viaTensors bool) resumable {
	build := func(t *testing.T) *UniPC {
		u, err := NewUniPC(cfg, n)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	wrap := func(u *UniPC, st *UniPCState) (stepFunc, func() []byte) {
		export := func() []byte {
			if !viaTensors {
				b, err := st.MarshalBinary()
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
			// Copy every vector, as a transport would, and encode the copy.
			m := map[string][]float32{}
			for k, v := range st.Tensors() {
				m[k] = slices.Clone(v)
			}
			s2, err := UniPCStateFromTensors(m)
			if err != nil {
				t.Fatal(err)
			}
			b, err := s2.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		return func(mo []float32, ts float32, x []float32) ([]float32, error) { return u.Step(st, mo, ts, x) }, export
	}
	u := build(t)
	return resumable{
		name: name, timesteps: u.Timesteps(),
		fresh: func(t *testing.T) (stepFunc, func() []byte) { u := build(t); return wrap(u, u.NewState()) },
		resume: func(t *testing.T, b []byte) (stepFunc, func() []byte) {
			st := new(UniPCState)
			if err := st.UnmarshalBinary(b); err != nil {
				t.Fatal(err)
			}
			return wrap(build(t), st)
		},
	}
}

func flowMatchResumable(t *testing.T, cfg FlowMatchConfig, n int) resumable {
	build := func(t *testing.T) *FlowMatchEuler {
		f, err := NewFlowMatchEuler(cfg, n, math.NaN())
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	wrap := func(f *FlowMatchEuler, st *FlowMatchState) (stepFunc, func() []byte) {
		return func(mo []float32, ts float32, x []float32) ([]float32, error) { return f.Step(st, mo, ts, x) },
			func() []byte { b, _ := st.MarshalBinary(); return b }
	}
	f := build(t)
	return resumable{
		name: "flowmatch", timesteps: f.Timesteps(),
		fresh: func(t *testing.T) (stepFunc, func() []byte) { f := build(t); return wrap(f, f.NewState()) },
		resume: func(t *testing.T, b []byte) (stepFunc, func() []byte) {
			st := new(FlowMatchState)
			if err := st.UnmarshalBinary(b); err != nil {
				t.Fatal(err)
			}
			return wrap(build(t), st)
		},
	}
}

// TestStageCutsBitIdentical cuts every step sequence at every point (and at every step at
// once), moves the state through its serialised form into a newly built scheduler, and
// requires the same bits as the uncut run.
func TestStageCutsBitIdentical(t *testing.T) {
	const n = 7
	order3 := wanUniPCConfig()
	order3.SolverOrder = 3
	bh1 := order3
	bh1.SolverType = "bh1"
	bh1.FinalSigmasType = "sigma_min"
	noFinal := wanUniPCConfig()
	noFinal.LowerOrderFinal = false
	noFinal.DisableCorrector = []int{2}
	eps := DefaultUniPCConfig()
	eps.UseKarrasSigmas = true
	flowCfg := DefaultFlowMatchConfig()
	flowCfg.Shift = 3
	scheds := []resumable{
		uniPCResumable(t, "unipc-wan", wanUniPCConfig(), n, false),
		uniPCResumable(t, "unipc-wan-tensors", wanUniPCConfig(), n, true),
		uniPCResumable(t, "unipc-order3", order3, n, false),
		uniPCResumable(t, "unipc-bh1-sigma-min", bh1, n, true),
		uniPCResumable(t, "unipc-no-final-disable", noFinal, n, false),
		uniPCResumable(t, "unipc-eps-karras", eps, n, false),
		flowMatchResumable(t, flowCfg, n),
	}
	for _, s := range scheds {
		t.Run(s.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			const size = 2 * 3 * 5
			x0 := randomVec(r, size)
			mos := make([][]float32, len(s.timesteps))
			for i := range mos {
				mos[i] = randomVec(r, size)
			}
			run := func(cuts map[int]bool) [][]float32 {
				step, export := s.fresh(t)
				x := slices.Clone(x0)
				var outs [][]float32
				for i, ts := range s.timesteps {
					if cuts[i] {
						step, export = s.resume(t, export())
					}
					mo := slices.Clone(mos[i])
					next, err := step(mo, ts, x)
					if err != nil {
						t.Fatal(err)
					}
					// Scribble over the inputs: the state must not alias them.
					for j := range mo {
						mo[j], x[j] = 1e30, -1e30
					}
					outs = append(outs, slices.Clone(next))
					x = next
				}
				return outs
			}
			want := run(nil)
			all := map[int]bool{}
			for c := 0; c <= len(s.timesteps); c++ {
				all[c] = true
				got := run(map[int]bool{c: true})
				for i := range want {
					assertBitEqual(t, "cut "+strconv.Itoa(c)+" step "+strconv.Itoa(i), got[i], want[i])
				}
			}
			got := run(all)
			for i := range want {
				assertBitEqual(t, "every cut, step "+strconv.Itoa(i), got[i], want[i])
			}
		})
	}
}

func TestUniPCWanSchedule(t *testing.T) {
	u, err := NewUniPC(wanUniPCConfig(), 6)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := u.TimestepsInt64(), []int64{999, 937, 856, 749, 599, 374}; !slices.Equal(got, want) {
		t.Errorf("timesteps %v, want %v", got, want)
	}
	sig := u.Sigmas()
	if len(sig) != 7 || sig[6] != 0 || sig[0] != 0.9996664524078369 {
		t.Errorf("sigmas %v", sig)
	}
}

func TestUniPCStepErrors(t *testing.T) {
	u, err := NewUniPC(wanUniPCConfig(), 2)
	if err != nil {
		t.Fatal(err)
	}
	st := u.NewState()
	if _, err := u.Step(st, make([]float32, 3), 999, make([]float32, 4)); err == nil {
		t.Error("length mismatch accepted")
	}
	x := make([]float32, 4)
	for _, ts := range u.Timesteps() {
		if x, err = u.Step(st, make([]float32, 4), ts, x); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := u.Step(st, make([]float32, 4), 0, x); err == nil {
		t.Error("step past the end accepted")
	}
	if _, err := u.Step(st, make([]float32, 5), 0, make([]float32, 5)); err == nil {
		t.Error("sample of another size than the history accepted")
	}
	bad := u.NewState()
	bad.ModelOutputs = bad.ModelOutputs[:1]
	if _, err := u.Step(bad, x, 999, x); err == nil {
		t.Error("state of another solver order accepted")
	}
}

func TestUniPCConfigValidation(t *testing.T) {
	for _, js := range []string{
		`{"thresholding": true}`,
		`{"solver_type": "dpm"}`,
		`{"prediction_type": "flow_prediction", "predict_x0": false}`,
		`{"use_beta_sigmas": true}`,
		`{"solver_order": 0}`,
		`{"timestep_spacing": "karras"}`,
		`{"use_dynamic_shifting": true, "time_shift_type": "linear"}`,
		`{"solver_p": {}}`,
	} {
		if _, err := ParseUniPCConfig([]byte(js)); err == nil {
			t.Errorf("%s accepted", js)
		}
	}
	c, err := ParseUniPCConfig([]byte(`{"solver_type": "midpoint"}`))
	if err != nil || c.SolverType != "bh2" {
		t.Errorf("midpoint: %v, %q", err, c.SolverType)
	}
	if _, err := ParseUniPCConfig([]byte(`{"thresholding": true}`)); !errors.Is(err, ErrUnsupported) {
		t.Errorf("thresholding error %v does not wrap ErrUnsupported", err)
	}
	if _, err := NewUniPC(wanUniPCConfig(), 0); err == nil {
		t.Error("0 steps accepted")
	}
	dyn := wanUniPCConfig()
	dyn.UseDynamicShifting = true
	if _, err := NewUniPC(dyn, 4); err == nil {
		t.Error("dynamic shifting without mu accepted")
	}
	if _, err := NewUniPCShifted(dyn, 4, 0.5); err != nil {
		t.Error(err)
	}
}

func TestFlowMatchStepErrors(t *testing.T) {
	f, err := NewFlowMatchEuler(DefaultFlowMatchConfig(), 3, math.NaN())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Step(f.NewState(), make([]float32, 2), 123.5, make([]float32, 2)); err == nil {
		t.Error("timestep outside the schedule accepted")
	}
	for _, js := range []string{`{"invert_sigmas": true}`, `{"stochastic_sampling": true}`, `{"shift": 0}`, `{"time_shift_type": "log"}`, `{"shift_terminal": 1.5}`} {
		if _, err := ParseFlowMatchConfig([]byte(js)); err == nil {
			t.Errorf("%s accepted", js)
		}
	}
	dyn := DefaultFlowMatchConfig()
	dyn.UseDynamicShifting = true
	if _, err := NewFlowMatchEuler(dyn, 3, math.NaN()); err == nil {
		t.Error("dynamic shifting without mu accepted")
	}
}

func TestUniPCStateRoundTrip(t *testing.T) {
	s := &UniPCState{StepIndex: 3, LowerOrderNums: 2, ThisOrder: 2,
		ModelOutputs:     [][]float32{nil, {1, 2}, {3, float32(math.Inf(-1))}},
		HistoryTimesteps: []float32{float32(math.NaN()), 937, 856},
		LastSample:       []float32{5, -0}}
	b, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var got UniPCState
	if err := got.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	b2, _ := got.MarshalBinary()
	if string(b) != string(b2) || got.StepIndex != 3 || got.ModelOutputs[0] != nil || got.ModelOutputs[2][1] != float32(math.Inf(-1)) {
		t.Errorf("round trip changed the state: %+v", got)
	}
	tg, err := UniPCStateFromTensors(s.Tensors())
	if err != nil {
		t.Fatal(err)
	}
	b3, _ := tg.MarshalBinary()
	if string(b3) != string(b) {
		t.Error("tensor round trip changed the state")
	}
	if err := got.UnmarshalBinary(b[:len(b)-1]); !errors.Is(err, ErrBadState) {
		t.Errorf("truncated state: %v", err)
	}
	if _, err := UniPCStateFromTensors(map[string][]float32{"unipc/counters": {0, 0, 0}, "unipc/timesteps": {1}, "x": {1}}); !errors.Is(err, ErrBadState) {
		t.Errorf("unknown tensor: %v", err)
	}
}

// FuzzUniPCStateUnmarshal checks that arbitrary bytes never panic the decoder, and that
// whatever it accepts re-encodes to the same bytes.
func FuzzUniPCStateUnmarshal(f *testing.F) {
	s := &UniPCState{StepIndex: 1, LowerOrderNums: 1, ThisOrder: 1, ModelOutputs: [][]float32{nil, {1, 2}},
		HistoryTimesteps: []float32{float32(math.NaN()), 999}, LastSample: []float32{3, 4}}
	b, _ := s.MarshalBinary()
	f.Add(b)
	f.Add([]byte(uniPCStateMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		var st UniPCState
		if err := st.UnmarshalBinary(data); err != nil {
			return
		}
		out, err := st.MarshalBinary()
		if err != nil {
			t.Fatalf("accepted state does not encode: %v", err)
		}
		if string(out) != string(data) {
			t.Fatalf("re-encoding differs")
		}
	})
}

// FuzzParseUniPCConfig checks that arbitrary config JSON never panics, and that every
// accepted config gives a well-formed schedule and a step that does not panic.
func FuzzParseUniPCConfig(f *testing.F) {
	f.Add([]byte(`{"prediction_type": "flow_prediction", "use_flow_sigmas": true, "flow_shift": 3.0}`), uint8(6), 0.5)
	f.Add([]byte(`{"use_karras_sigmas": true, "timestep_spacing": "trailing", "solver_order": 3}`), uint8(9), 0.0)
	f.Add([]byte(`{"use_dynamic_shifting": true, "use_flow_sigmas": true, "prediction_type": "flow_prediction"}`), uint8(3), 1.1)
	f.Add([]byte(`{"use_exponential_sigmas": true, "beta_schedule": "squaredcos_cap_v2", "num_train_timesteps": 20}`), uint8(1), 0.0)
	f.Fuzz(func(t *testing.T, data []byte, steps uint8, mu float64) {
		c, err := ParseUniPCConfig(data)
		if err != nil || c.NumTrainTimesteps > 5000 {
			return
		}
		if !c.UseDynamicShifting {
			mu = math.NaN()
		}
		u, err := NewUniPCShifted(c, int(steps)%40+1, mu)
		if err != nil {
			return
		}
		if len(u.Sigmas()) != u.NumSteps()+1 {
			t.Fatalf("%d sigmas for %d steps", len(u.Sigmas()), u.NumSteps())
		}
		st := u.NewState()
		x := []float32{0.5, -1}
		ts := u.Timesteps()
		// A repeated first timestep starts at its second occurrence (diffusers'
		// index_for_timestep), so the run then ends early with an error.
		repeated := slices.Index(ts[1:], ts[0]) >= 0
		for _, tt := range ts {
			if x, err = u.Step(st, []float32{1, 2}, tt, x); err != nil {
				if repeated {
					return
				}
				t.Fatal(err)
			}
		}
	})
}

// FuzzParseFlowMatchConfig is FuzzParseUniPCConfig for the flow-match Euler scheduler.
func FuzzParseFlowMatchConfig(f *testing.F) {
	f.Add([]byte(`{"shift": 3.0}`), uint8(6), 0.0)
	f.Add([]byte(`{"use_dynamic_shifting": true, "time_shift_type": "linear"}`), uint8(4), 1.5)
	f.Add([]byte(`{"shift_terminal": 0.1, "use_karras_sigmas": true}`), uint8(8), 0.0)
	f.Fuzz(func(t *testing.T, data []byte, steps uint8, mu float64) {
		c, err := ParseFlowMatchConfig(data)
		if err != nil || c.NumTrainTimesteps > 5000 {
			return
		}
		if !c.UseDynamicShifting {
			mu = math.NaN()
		}
		fm, err := NewFlowMatchEuler(c, int(steps)%40+1, mu)
		if err != nil {
			return
		}
		if s := fm.Sigmas(); len(s) != fm.NumSteps()+1 || s[len(s)-1] != 0 {
			t.Fatalf("sigmas %v", s)
		}
	})
}
