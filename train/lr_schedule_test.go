package train

import (
	stdcontext "context"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/vdpp/vdpp/model/nn"
)

func TestLRAt(t *testing.T) {
	o := DefaultOptions()
	o.LR, o.Steps = 1e-3, 110
	decay := o
	decay.LRFinal, decay.LRDecayStart = 1e-4, 10
	for _, tc := range []struct {
		name string
		o    Options
		k    int
		want float64
	}{
		{"constant", o, 0, 1e-3},
		{"constant late", o, 109, 1e-3},
		{"before the decay", decay, 5, 1e-3},
		{"decay start", decay, 10, 1e-3},
		{"half way", decay, 60, 5.5e-4},
		{"quarter", decay, 35, 1e-4 + 9e-4*0.5*(1+math.Cos(math.Pi/4))},
		{"at steps", decay, 110, 1e-4},
		{"past steps", decay, 500, 1e-4},
	} {
		if got := LRAt(tc.o, tc.k); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s: LRAt(step %d) = %v, want %v", tc.name, tc.k, got, tc.want)
		}
	}
	// Monotone between the ends.
	prev := LRAt(decay, 0)
	for k := 1; k <= decay.Steps; k++ {
		if lr := LRAt(decay, k); lr > prev {
			t.Fatalf("LRAt rises at step %d: %v > %v", k, lr, prev)
		} else {
			prev = lr
		}
	}
}

func TestLRScheduleValidate(t *testing.T) {
	for _, tc := range []struct {
		final float64
		start int
		ok    bool
	}{
		{0, 0, true},
		{1e-5, 0, true},
		{1e-5, 99, true},
		{-1e-5, 0, false},
		{math.NaN(), 0, false},
		{1e-5, -1, false},
		{1e-5, 100, false},
	} {
		o := DefaultOptions()
		o.Dir, o.Steps, o.LRFinal, o.LRDecayStart = "d", 100, tc.final, tc.start
		if err := o.Validate(); (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrOptions)) {
			t.Errorf("final %v from %d: Validate() = %v, want ok=%v", tc.final, tc.start, err, tc.ok)
		}
	}
}

// TestLRScheduleSteps checks that the decayed rate is the one a step uses: a run whose
// second step decays to 7.5e-4 ends with the weights of a run resumed for that step at
// --lr 7.5e-4, and not with those of a constant 1e-3.
func TestLRScheduleSteps(t *testing.T) {
	b, err := nn.NewBackend("go")
	if err != nil {
		t.Fatal(err)
	}
	cfg := microConfigs()
	opts := func(dir string, steps int, lr, final float64, resume bool) Options {
		o := DefaultOptions()
		o.Dir, o.Steps, o.Resume, o.Configs = dir, steps, resume, &cfg
		o.VAEFrames, o.VAECrop, o.CheckpointEvery, o.Train = 2, 16, 0, 8
		o.LR, o.LRFinal = lr, final
		return o
	}
	run := func(o Options) {
		t.Helper()
		if _, err := Run(stdcontext.Background(), b, o); err != nil {
			t.Fatal(err)
		}
	}
	// Steps 2: step 0 is at the decay start (1e-3), step 1 half way: (1e-3+5e-4)/2.
	decayed, resumed, constant := t.TempDir(), t.TempDir(), t.TempDir()
	run(opts(decayed, 2, 1e-3, 5e-4, false))
	run(opts(resumed, 1, 1e-3, 0, false))
	run(opts(resumed, 2, 7.5e-4, 0, true))
	run(opts(constant, 2, 1e-3, 0, false))
	dw := checkpointWeights(t, decayed, PhaseVAE)
	requireSameWeights(t, "decayed vs resumed at 7.5e-4", dw, checkpointWeights(t, resumed, PhaseVAE))
	cw := checkpointWeights(t, constant, PhaseVAE)
	same := true
	for n, w := range dw {
		for i, v := range w.Data {
			if cw[n].Data[i] != v {
				same = false
			}
		}
	}
	if same {
		t.Fatal("the decayed run ends with the weights of a constant-lr run: the schedule is not applied")
	}
}

// ExampleLRAt: a run to step 100 that decays 2e-4 to 2e-5 from step 0.
func ExampleLRAt() {
	o := DefaultOptions()
	o.LR, o.LRFinal, o.Steps = 2e-4, 2e-5, 100
	for _, k := range []int{0, 50, 99} {
		fmt.Printf("step %d: %.3g\n", k, LRAt(o, k))
	}
	// Output:
	// step 0: 0.0002
	// step 50: 0.00011
	// step 99: 2e-05
}
