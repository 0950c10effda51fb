package pipeline_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/model/synthetic"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/sched"
	"github.com/vdpp/vdpp/tensor"
)

// adamsBashforth is a toy multistep scheduler: SVD's Euler schedule, but the update is the
// second-order Adams–Bashforth step on the derivative d = (x − x̂0)/σ,
// x' = x + Δσ·(3/2·d_k − 1/2·d_{k−1}), which needs the previous step's derivative: state.
type adamsBashforth struct{ *sched.Euler }

const abPrev = "prev_derivative"

func (a adamsBashforth) Update(dst, modelOut, x []float32, step int, prev sched.State) (sched.State, error) {
	d := make([]float32, len(x))
	if err := a.PredOriginal(d, modelOut, x, step); err != nil {
		return sched.State{}, err
	}
	s, dt := a.Sigmas[step], a.Sigmas[step+1]-a.Sigmas[step]
	for i := range d {
		d[i] = (x[i] - d[i]) / s
	}
	old, ok := prev.Latent[abPrev]
	for i := range d {
		if ok {
			dst[i] = x[i] + dt*(1.5*d[i]-0.5*old[i])
		} else {
			dst[i] = x[i] + dt*d[i]
		}
	}
	return sched.State{Latent: map[string][]float32{abPrev: d}}, nil
}

// scaledModel is a second "expert": the synthetic model's output times a factor.
type scaledModel struct {
	model.Denoiser
	factor float32
}

func (m scaledModel) Predict(ctx context.Context, in model.Input) (*tensor.Dense, error) {
	out, err := m.Denoiser.Predict(ctx, in)
	if err != nil {
		return nil, err
	}
	for i := range out.Data {
		out.Data[i] *= m.factor
	}
	return out, nil
}

// runStepper runs a whole pipeline in this process over the in-process transport (every
// hand-off goes through Item.ToMessage and ItemFromMessage), with steppers from mk.
func runStepper(t *testing.T, rs runSpec, mk func(sc *sched.Euler) *pipeline.Stepper) map[int64]*tensor.Dense {
	t.Helper()
	finals, _ := runStepperLogs(t, rs, mk)
	return finals
}

// runStepperLogs is runStepper that also returns each sample's cache records.
func runStepperLogs(t *testing.T, rs runSpec, mk func(sc *sched.Euler) *pipeline.Stepper) (map[int64]*tensor.Dense, map[int64][]pipeline.CacheRecord) {
	t.Helper()
	plan, err := pipeline.EvenStages(rs.steps, rs.stages)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := sched.New(sched.DefaultSVDConfig(), rs.steps)
	if err != nil {
		t.Fatal(err)
	}
	w := &noiseWorkload{shape: []int{3, 2, 4, 4}, sigma: sc.InitNoiseSigma, finals: map[int64]*tensor.Dense{}, cache: rs.cache}
	if rs.guided {
		w.guidance = sched.GuidanceWeights(1, 3, 3)
	}
	var trs []comm.Transport
	if rs.stages > 1 {
		trs = comm.NewLocal(rs.stages, comm.Options{RecvTimeout: 10 * time.Second})
	}
	errs := make([]error, rs.stages)
	var wg sync.WaitGroup
	for k := 0; k < rs.stages; k++ {
		var tr comm.Transport
		if trs != nil {
			tr = trs[k]
		}
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			errs[k] = pipeline.Run(context.Background(), pipeline.Config{
				Plan: plan, Stage: k, PrevRank: k - 1, NextRank: k + 1, TotalSteps: rs.steps,
				NumSamples: rs.samples, MicroBatch: rs.micro, Transport: tr, Stepper: mk(sc), Workload: w,
			})
			if errs[k] != nil && tr != nil {
				tr.Close()
			}
		}(k)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if len(w.finals) != rs.samples {
		t.Fatalf("%d finals, want %d", len(w.finals), rs.samples)
	}
	return w.finals, w.logs
}

func synth(t *testing.T) model.Denoiser {
	t.Helper()
	d, err := synthetic.New(model.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func assertSameFinals(t *testing.T, got, want map[int64]*tensor.Dense) {
	t.Helper()
	for s := range want {
		if !tensor.BitEqual(got[s], want[s]) {
			t.Fatalf("sample %d differs: rel L2 %g", s, tensor.RelL2(got[s], want[s]))
		}
	}
}

func differ(a, b map[int64]*tensor.Dense) bool {
	for s := range a {
		if !tensor.BitEqual(a[s], b[s]) {
			return true
		}
	}
	return false
}

// A multistep scheduler cut over K = 1..4 stages gives the bits of one stage: its state
// travels in the hand-off.
func TestMultistepStateAcrossStages(t *testing.T) {
	multistep := func(sc *sched.Euler) *pipeline.Stepper {
		return &pipeline.Stepper{Model: synth(t), Sched: adamsBashforth{sc}}
	}
	for _, guided := range []bool{false, true} {
		base := runSpec{stages: 1, steps: 6, samples: 5, micro: 2, guided: guided}
		want := runStepper(t, base, multistep)
		euler := runStepper(t, base, func(sc *sched.Euler) *pipeline.Stepper { return &pipeline.Stepper{Model: synth(t), Sched: sc} })
		if !differ(want, euler) {
			t.Fatal("the multistep scheduler gives Euler's result: its state is never used")
		}
		for k := 1; k <= 4; k++ {
			rs := base
			rs.stages = k
			t.Run(fmt.Sprintf("guided=%v/K=%d", guided, k), func(t *testing.T) {
				assertSameFinals(t, runStepper(t, rs, multistep), want)
			})
		}
	}
}

// UniPC (Wan's scheduler, flow prediction, order 2) cut over K = 1..4 stages gives the bits
// of one stage: its history travels in the hand-off. With two experts split at a step, as
// Wan 2.2's high- and low-noise transformers.
func TestUniPCAcrossStages(t *testing.T) {
	cfg, err := sched.ParseUniPCConfig([]byte(`{"prediction_type": "flow_prediction", "use_flow_sigmas": true,
		"flow_shift": 3.0, "solver_order": 2, "solver_type": "bh2", "final_sigmas_type": "zero"}`))
	if err != nil {
		t.Fatal(err)
	}
	const steps = 7
	unipc := func(*sched.Euler) *pipeline.Stepper {
		u, err := sched.NewUniPC(cfg, steps)
		if err != nil {
			t.Fatal(err)
		}
		return &pipeline.Stepper{Sched: u, Experts: []pipeline.Expert{
			{Steps: pipeline.Range{Start: 0, End: 3}, Model: scaledModel{synth(t), 0.5}},
			{Steps: pipeline.Range{Start: 3, End: steps}, Model: synth(t)},
		}}
	}
	base := runSpec{stages: 1, steps: steps, samples: 4, micro: 2, guided: true}
	want := runStepper(t, base, unipc)
	for k := 2; k <= 4; k++ {
		rs := base
		rs.stages = k
		t.Run(fmt.Sprintf("K=%d", k), func(t *testing.T) { assertSameFinals(t, runStepper(t, rs, unipc), want) })
	}
	// The low-noise expert's own guidance scale (guidance_scale_2) changes the result, and
	// cuts still give the bits of one stage.
	scale2 := func(e *sched.Euler) *pipeline.Stepper {
		st := unipc(e)
		st.Experts[1].Guidance = []float32{2, 2, 2}
		return st
	}
	want2 := runStepper(t, base, scale2)
	if !differ(want, want2) {
		t.Fatal("the second expert's guidance changed nothing")
	}
	rs := base
	rs.stages = 3
	assertSameFinals(t, runStepper(t, rs, scale2), want2)
}

// Two experts by step range (as Wan 2.2's high- and low-noise denoisers): any stage cut,
// including one on the expert boundary, gives the bits of one stage, and each expert runs
// exactly its steps.
func TestExpertsByStepRange(t *testing.T) {
	const steps, boundary = 6, 2
	var mu sync.Mutex
	calls := map[string][]int{}
	record := func(name string) stepSeen {
		return func(k int) {
			mu.Lock()
			defer mu.Unlock()
			calls[name] = append(calls[name], k)
		}
	}
	experts := func(sc *sched.Euler) *pipeline.Stepper {
		return &pipeline.Stepper{Sched: adamsBashforth{sc}, Experts: []pipeline.Expert{
			{Steps: pipeline.Range{Start: 0, End: boundary}, Model: countingModel{scaledModel{synth(t), 0.5}, record("high")}},
			{Steps: pipeline.Range{Start: boundary, End: steps}, Model: countingModel{synth(t), record("low")}},
		}}
	}
	base := runSpec{stages: 1, steps: steps, samples: 3, micro: 1, guided: true}
	want := runStepper(t, base, experts)
	if got := calls["high"]; len(got) != 3*boundary {
		t.Fatalf("high-noise expert ran %d calls (%v), want %d", len(got), got, 3*boundary)
	}
	for name, ks := range calls {
		for _, k := range ks {
			if (k < boundary) != (name == "high") {
				t.Fatalf("expert %s ran step %d", name, k)
			}
		}
	}
	one := runStepper(t, base, func(sc *sched.Euler) *pipeline.Stepper {
		return &pipeline.Stepper{Model: synth(t), Sched: adamsBashforth{sc}}
	})
	if !differ(want, one) {
		t.Fatal("two experts give the one-model result")
	}
	for k := 2; k <= 4; k++ {
		rs := base
		rs.stages = k
		t.Run(fmt.Sprintf("K=%d", k), func(t *testing.T) { assertSameFinals(t, runStepper(t, rs, experts), want) })
	}
}

// stepSeen is told the step of every call.
type stepSeen func(step int)

// countingModel reports every step it is called for.
type countingModel struct {
	model.Denoiser
	seen stepSeen
}

func (m countingModel) Predict(ctx context.Context, in model.Input) (*tensor.Dense, error) {
	m.seen(in.Step)
	return m.Denoiser.Predict(ctx, in)
}

// A step with no denoiser for it is an error, not a crash.
func TestStepWithoutExpert(t *testing.T) {
	sc, err := sched.New(sched.DefaultSVDConfig(), 4)
	if err != nil {
		t.Fatal(err)
	}
	st := &pipeline.Stepper{Sched: sc, Experts: []pipeline.Expert{{Steps: pipeline.Range{Start: 0, End: 2}, Model: synth(t)}}}
	it := &pipeline.Item{Samples: []int64{0}, Latent: tensor.New(1, 1, 2, 2, 2), Step: 3, Cond: []model.Conditioning{{synthetic.CondKey: tensor.New(2)}}}
	if err := st.Step(context.Background(), it); err == nil {
		t.Fatal("a step outside every expert ran")
	}
}

// wireRoundTrip sends it through the wire format (encoded, framed, read back, decoded).
func wireRoundTrip(t *testing.T, it *pipeline.Item) *pipeline.Item {
	t.Helper()
	buf, err := comm.AppendMessage(nil, it.ToMessage(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	m, err := comm.NewFrameReader(bytes.NewReader(buf), 4096, 0).ReadMessage()
	if err != nil {
		t.Fatal(err)
	}
	got, err := pipeline.ItemFromMessage(m)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// The scheduler state survives the wire format; a state of the wrong size is refused.
func TestItemMessageSchedState(t *testing.T) {
	it := &pipeline.Item{Group: 3, Samples: []int64{4, 5}, Step: 2, Latent: tensor.New(2, 1, 1, 1, 2),
		SchedState: sched.State{Latent: map[string][]float32{"a": {1, 2, 3, 4}, "b": {-1, 0.5, 7, 8}}, Shared: map[string][]float32{"n": {3, 1}},
			PerRow: map[string][]float32{"k": {1, 2, 3, 4, 5, 6}}}}
	got := wireRoundTrip(t, it)
	if len(got.SchedState.Latent) != 2 || len(got.SchedState.Shared) != 1 || len(got.SchedState.PerRow) != 1 || fmt.Sprint(got.SchedState) != fmt.Sprint(it.SchedState) {
		t.Fatalf("state %v, want %v", got.SchedState, it.SchedState)
	}
	bad := it.ToMessage()
	for i := range bad.Tensors {
		if bad.Tensors[i].Name == "sched_state/a" {
			bad.Tensors[i].Tensor = tensor.New(3)
		}
	}
	if _, err := pipeline.ItemFromMessage(bad); err == nil {
		t.Fatal("a state of the wrong size was accepted")
	}
	bad = it.ToMessage()
	for i := range bad.Tensors {
		if bad.Tensors[i].Name == "sched_rows/k" {
			bad.Tensors[i].Tensor = tensor.New(3, 2)
		}
	}
	if _, err := pipeline.ItemFromMessage(bad); err == nil {
		t.Fatal("row state for 3 rows was accepted for an item of 2 samples")
	}
}
