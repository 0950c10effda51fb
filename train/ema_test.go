package train

import (
	stdcontext "context"
	"errors"
	"math"
	"testing"

	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/tensor"
)

// TestEMA: the checkpoint's averages follow e_k = d·e_(k-1) + (1-d)·w_k from e_0 = the
// initial weights, across resumes that leave --ema unset; Export's weights are the
// averages unless raw; a decoder-only resume drops the frozen encoder's averages; a
// negative decay drops them all.
func TestEMA(t *testing.T) {
	b, err := nn.NewBackend("go")
	if err != nil {
		t.Fatal(err)
	}
	cfg := microConfigs()
	const decay = 0.5
	dir := t.TempDir()
	run := func(steps int, ema float64, resume, decoderOnly bool) {
		t.Helper()
		o := DefaultOptions()
		o.Dir, o.Steps, o.Resume, o.Configs, o.EMA, o.DecoderOnly = dir, steps, resume, &cfg, ema, decoderOnly
		o.VAEFrames, o.VAECrop, o.CheckpointEvery, o.Train = 2, 16, 0, 8
		if _, err := Run(stdcontext.Background(), b, o); err != nil {
			t.Fatalf("run to step %d: %v", steps, err)
		}
	}
	load := func() (*context.Context, map[string]string) {
		t.Helper()
		ctx, md, err := loadContext(StatePath(dir, PhaseVAE))
		if err != nil {
			t.Fatal(err)
		}
		return ctx, md
	}

	run(0, decay, false, false)
	ctx, _ := load()
	want, err := modelWeights(ctx) // e_0 = w_0
	if err != nil {
		t.Fatal(err)
	}
	for k := 1; k <= 3; k++ {
		run(k, 0, true, false) // 0: continue the checkpoint's EMA
		ctx, md := load()
		if md[metaEMADecay] != "0.5" {
			t.Fatalf("step %d: metadata %s = %q, want 0.5", k, metaEMADecay, md[metaEMADecay])
		}
		raw, err := modelWeights(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for n, w := range raw {
			for i := range w.Data {
				want[n].Data[i] = decay*want[n].Data[i] + (1-decay)*w.Data[i]
			}
		}
		got, ok, err := emaWeights(ctx)
		if err != nil || !ok {
			t.Fatalf("step %d: averages: ok %v, %v", k, ok, err)
		}
		if d := maxAbsDiff(got, want); d > 1e-6 {
			t.Fatalf("step %d: averages differ from the recurrence by %g", k, d)
		}
		if d := maxAbsDiff(got, raw); d == 0 {
			t.Fatalf("step %d: the averages equal the raw weights", k)
		}
	}
	ctx, _ = load()
	exported, err := exportWeights(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if d := maxAbsDiff(exported, want); d > 1e-6 {
		t.Fatalf("exported weights are not the averages (off by %g)", d)
	}
	raw, _ := modelWeights(ctx)
	if exported, _ = exportWeights(ctx, true); maxAbsDiff(exported, raw) != 0 {
		t.Fatal("raw export is not the trained weights")
	}

	run(4, 0, true, true) // decoder only: the frozen encoder's averages go
	ctx, _ = load()
	n := 0
	for v := range ctx.IterVariables() {
		if v.Scope() != emaScope {
			continue
		}
		if isEncoderTensor(v.Name()) {
			t.Fatalf("frozen encoder weight %s has an average", v.Name())
		}
		n++
	}
	if n == 0 {
		t.Fatal("no decoder averages")
	}

	run(5, -1, true, false) // off: the averages go
	ctx, md := load()
	if _, ok, _ := emaWeights(ctx); ok {
		t.Fatal("averages kept after --ema < 0")
	}
	if _, ok := md[metaEMADecay]; ok {
		t.Fatalf("metadata still has %s", metaEMADecay)
	}

	o := DefaultOptions()
	o.Dir, o.EMA = dir, 1
	if err := o.Validate(); !errors.Is(err, ErrOptions) {
		t.Fatalf("ema 1: %v, want ErrOptions", err)
	}
}

// maxAbsDiff is the largest element difference between same-named tensors of a and b
// (+Inf when their names or shapes differ).
func maxAbsDiff(a, b map[string]*tensor.Dense) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	var m float64
	for n, x := range a {
		y, ok := b[n]
		if !ok || len(x.Data) != len(y.Data) {
			return math.Inf(1)
		}
		for i := range x.Data {
			m = max(m, math.Abs(float64(x.Data[i]-y.Data[i])))
		}
	}
	return m
}
