package job

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

// quadAct is a model whose step memory is its spatial attention's: (h·w)² per frame.
func quadAct(p Params) int64 {
	s := int64(p.Height/8) * int64(p.Width/8)
	return int64(p.NumFrames) * s * s
}

// latent4 is the step memory of a model whose step needs its float32 latent of 4 channels,
// twice when guided.
func latent4(p Params) int64 {
	n := int64(4 * p.NumFrames * 4 * (p.Height / 8) * (p.Width / 8))
	if p.MaxGuidance > 1 {
		n *= 2
	}
	return n
}

func TestJobCost(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Params
		act  ActivationFunc
		want Cost
	}{
		{"native builtin", Params{Height: 64, Width: 64, NumFrames: 14, Steps: 25}, nil,
			Cost{Pixels: 4096, Frames: 14, Steps: 25, Work: 4096 * 14 * 25}},
		{"a 1024x1024 job of 25 frames and 50 steps", Params{Height: 1024, Width: 1024, NumFrames: 25, Steps: 50}, quadAct,
			Cost{Pixels: 1 << 20, Frames: 25, Steps: 50, Work: 1 << 20 * 25 * 50, ActivationBytes: 25 * (1 << 14) * (1 << 14)}},
		{"latent, guided", Params{Height: 16, Width: 8, NumFrames: 3, Steps: 1, MaxGuidance: 3}, latent4,
			Cost{Pixels: 128, Frames: 3, Steps: 1, Work: 384, ActivationBytes: 4 * 3 * 4 * 2 * 1 * 2}},
		{"latent, unguided", Params{Height: 16, Width: 8, NumFrames: 3, Steps: 1, MaxGuidance: 1}, latent4,
			Cost{Pixels: 128, Frames: 3, Steps: 1, Work: 384, ActivationBytes: 4 * 3 * 4 * 2 * 1}},
		{"saturates", Params{Height: math.MaxInt32, Width: math.MaxInt32, NumFrames: math.MaxInt32, Steps: 2}, nil,
			Cost{Pixels: math.MaxInt32 * math.MaxInt32, Frames: math.MaxInt32, Steps: 2, Work: math.MaxInt64}},
	} {
		if got := JobCost(tc.p, tc.act); got != tc.want {
			t.Errorf("%s: JobCost = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestDeriveCostLimits(t *testing.T) {
	native := Params{Height: 64, Width: 64, NumFrames: 14, Steps: 25}
	for _, tc := range []struct {
		name     string
		act      ActivationFunc
		multiple float64
		want     CostLimits
	}{
		{"x4", quadAct, 4, CostLimits{Multiple: 4, MaxPixels: 4 * 4096, MaxWork: 4 * 4096 * 14 * 25,
			// 128x128 at 14 frames (16x the native scores) beats 64x64 at 56 frames (4x).
			MaxActivationBytes: 14 * 256 * 256, Native: native}},
		{"x1", quadAct, 1, CostLimits{Multiple: 1, MaxPixels: 4096, MaxWork: 4096 * 14 * 25,
			MaxActivationBytes: 14 * 64 * 64, Native: native}},
		{"frames dominate", func(p Params) int64 { return int64(p.NumFrames * p.NumFrames) }, 2,
			CostLimits{Multiple: 2, MaxPixels: 8192, MaxWork: 2 * 4096 * 14 * 25, MaxActivationBytes: 28 * 28, Native: native}},
		{"no estimate", nil, 4, CostLimits{Multiple: 4, MaxPixels: 4 * 4096, MaxWork: 4 * 4096 * 14 * 25, Native: native}},
		{"off", quadAct, 0, CostLimits{Native: native}},
		{"negative", quadAct, -1, CostLimits{Native: native}},
		{"NaN", quadAct, math.NaN(), CostLimits{Native: native}},
	} {
		if got := DeriveCostLimits(native, tc.act, tc.multiple); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: DeriveCostLimits = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestCostLimitsCheck(t *testing.T) {
	native := Params{Height: 64, Width: 64, NumFrames: 14, Steps: 25}
	l := DeriveCostLimits(native, quadAct, 4)
	for _, tc := range []struct {
		name      string
		p         Params
		wantParam string // "" when admitted
	}{
		{"native", native, ""},
		{"twice the side", Params{Height: 128, Width: 128, NumFrames: 14, Steps: 25}, ""},
		{"four times the frames", Params{Height: 64, Width: 64, NumFrames: 56, Steps: 25}, ""},
		{"four times the steps", Params{Height: 64, Width: 64, NumFrames: 14, Steps: 100}, ""},
		{"a 1024x1024 job of 25 frames and 50 steps", Params{Height: 1024, Width: 1024, NumFrames: 25, Steps: 50}, "size"},
		{"too wide", Params{Height: 64, Width: 264, NumFrames: 1, Steps: 1}, "size"},
		{"work: steps", Params{Height: 64, Width: 64, NumFrames: 14, Steps: 101}, "steps"},
		{"work: frames", Params{Height: 64, Width: 64, NumFrames: 60, Steps: 25}, "num_frames"},
		{"work: size", Params{Height: 128, Width: 128, NumFrames: 14, Steps: 26}, "size"},
		// Under the work limit (1 step) but over the step memory of 128x128 at 14 frames.
		{"memory: size", Params{Height: 128, Width: 128, NumFrames: 28, Steps: 1}, "size"},
		{"memory: frames", Params{Height: 64, Width: 64, NumFrames: 225, Steps: 1}, "num_frames"},
		{"memory: at the limit", Params{Height: 64, Width: 64, NumFrames: 224, Steps: 1}, ""},
	} {
		checkCostError(t, tc.name, l.Check(JobCost(tc.p, quadAct)), tc.wantParam, "")
	}
	if err := (CostLimits{}).Check(JobCost(Params{Height: 1 << 14, Width: 1 << 14, NumFrames: 1000, Steps: 1000}, quadAct)); err != nil {
		t.Errorf("no limits: %v", err)
	}
}

// TestCostLimitsCheckInput: a job's decoded input image counts against the machine's
// memory share (the coordinator holds it there while it prepares the job), not against
// the model's multiple of its native step.
func TestCostLimitsCheckInput(t *testing.T) {
	native := Params{Height: 64, Width: 64, NumFrames: 14, Steps: 25}
	l := DeriveCostLimits(native, quadAct, 4)
	m := Machine{MemoryBytes: 1 << 20, Ranks: 1}
	share := m.StepMemory()
	if share <= 0 || l.MaxActivationBytes <= 0 {
		t.Fatalf("share %d, limits %+v", share, l)
	}
	for _, tc := range []struct {
		name      string
		limits    CostLimits
		input     int64
		wantParam string // "" when admitted
	}{
		{"a small image", l.WithMachine(m), 64 * 64 * 4, ""},
		{"at the machine's share", l.WithMachine(m), share, ""},
		{"over the machine's share", l.WithMachine(m), share + 1, "image"},
		{"over the model's step limit, no machine", l, 100 * l.MaxActivationBytes, ""},
		{"no limits", CostLimits{}, 1 << 40, ""},
	} {
		cost := JobCost(native, quadAct)
		cost.InputBytes = tc.input
		checkCostError(t, tc.name, tc.limits.Check(cost), tc.wantParam, "memory decoded")
	}
}

// checkCostError fails the test unless err is nil for wantParam "", and otherwise a
// *CostError naming wantParam, wrapping ErrCostLimit and ErrTooLarge, whose message holds
// text.
func checkCostError(t *testing.T, name string, err error, wantParam, text string) {
	t.Helper()
	var ce *CostError
	switch {
	case wantParam == "" && err != nil:
		t.Errorf("%s: refused: %v", name, err)
	case wantParam != "" && !errors.As(err, &ce):
		t.Errorf("%s: Check = %v, want a *CostError", name, err)
	case wantParam != "" && (ce.Param != wantParam || !errors.Is(err, ErrCostLimit) || !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), text)):
		t.Errorf("%s: %v (param %q), want param %q wrapping ErrCostLimit and ErrTooLarge, saying %q", name, err, ce.Param, wantParam, text)
	}
}

func TestDeriveMaxFrames(t *testing.T) {
	for _, c := range []struct {
		name string
		l    CostLimits
		want int
	}{
		{"builtin", CostLimits{Multiple: 4, Native: Params{NumFrames: 14}}, 56},
		{"wan", CostLimits{Multiple: 4, Native: Params{NumFrames: 81}}, 324},
		{"never below the default", CostLimits{Multiple: 1, Native: Params{NumFrames: 14}}, 25},
		{"no cost limits", CostLimits{Native: Params{NumFrames: 81}}, 25},
	} {
		if got := DeriveMaxFrames(c.l); got != c.want {
			t.Errorf("%s: DeriveMaxFrames = %d, want %d", c.name, got, c.want)
		}
	}
}

func TestMachineStepMemory(t *testing.T) {
	const gib = int64(1) << 30
	for _, c := range []struct {
		name string
		m    Machine
		want int64
	}{
		{"unknown memory", Machine{WeightBytes: gib, Ranks: 2}, 0},
		{"two ranks and the decoder share what the weights leave", Machine{MemoryBytes: 20 * gib, WeightBytes: 2 * gib, Ranks: 2}, (17*gib - 2*gib) / 3},
		{"weights over the usable memory", Machine{MemoryBytes: 10 * gib, WeightBytes: 9 * gib, Ranks: 1}, -1},
	} {
		if got := c.m.StepMemory(); got != c.want {
			t.Errorf("%s: StepMemory = %d, want %d", c.name, got, c.want)
		}
	}
}

// A model's step memory limit is fitted to the machine: the smaller of its multiple-based
// limit and what the machine can give a step; the refusal says which, with the numbers.
func TestWithMachine(t *testing.T) {
	const gib = int64(1) << 30
	native := Params{Height: 480, Width: 832, NumFrames: 81, Steps: 50}
	l := DeriveCostLimits(native, quadAct, 4)
	small := Machine{MemoryBytes: 8 * gib, WeightBytes: 1 * gib, Ranks: 1}
	fitted := l.WithMachine(small)
	if want := small.StepMemory(); fitted.MaxActivationBytes != want || want >= l.MaxActivationBytes {
		t.Fatalf("limit on 8 GiB: %d, want the machine's %d (the model's is %d)", fitted.MaxActivationBytes, want, l.MaxActivationBytes)
	}
	big := Machine{MemoryBytes: 1 << 50, Ranks: 1}
	if got := l.WithMachine(big).MaxActivationBytes; got != l.MaxActivationBytes {
		t.Fatalf("limit on a huge machine: %d, want the model's %d", got, l.MaxActivationBytes)
	}
	if got := l.WithMachine(Machine{}).MaxActivationBytes; got != l.MaxActivationBytes {
		t.Fatalf("limit with the memory unknown: %d, want the model's %d", got, l.MaxActivationBytes)
	}
	job := native
	job.Height, job.Width = 1024, 1024
	err := fitted.Check(JobCost(job, quadAct))
	var ce *CostError
	if !errors.As(err, &ce) || ce.Param != "size" || !strings.Contains(err.Error(), "a step may use on this server") ||
		!strings.Contains(err.Error(), "8192 MiB of memory") || !strings.Contains(err.Error(), "1024 MiB of weights") {
		t.Fatalf("refusal on the machine: %v", err)
	}
}

func TestDerivedInputAndDiskLimits(t *testing.T) {
	svd := Params{Height: 576, Width: 1024, NumFrames: 14}
	tiny := Params{Height: 64, Width: 64, NumFrames: 14}
	if got := DeriveMaxImagePixels(svd); got != 16*576*1024 {
		t.Errorf("image pixels for SVD's native job: %d", got)
	}
	if got := DeriveMaxImagePixels(tiny); got != 1<<20 {
		t.Errorf("image pixels for a 64x64 model: %d, want the megapixel floor", got)
	}
	if got := DiskBytes(svd); got < 3*576*1024*14 {
		t.Errorf("disk of SVD's native job %d: less than its raw frames", got)
	}
	if got := DeriveMinFreeBytes(tiny); got != 256<<20 {
		t.Errorf("free space kept for a tiny model: %d, want the 256 MiB floor", got)
	}
	if got := DiskBytes(Params{Height: math.MaxInt32, Width: math.MaxInt32, NumFrames: math.MaxInt32}); got != math.MaxInt64 {
		t.Errorf("disk of a huge job %d, want saturated", got)
	}
}
