package eval

import (
	"context"
	"image"
	"math"
	"testing"
	"time"

	"github.com/vdpp/vdpp/data/procedural"
	"github.com/vdpp/vdpp/tensor"
)

func TestPSNR(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b []float32
		want float64
	}{
		{"mse 0.01", []float32{0, 0, 0, 0}, []float32{0.1, 0.1, 0.1, 0.1}, 20},
		{"mse 0.25", []float32{0, 1}, []float32{0.5, 0.5}, 10 * math.Log10(4)},
		{"half wrong", []float32{0, 0}, []float32{1, 0}, 10 * math.Log10(2)},
		{"identical", []float32{0.3}, []float32{0.3}, MaxPSNR},
	} {
		got, err := PSNR(tc.a, tc.b)
		if err != nil || math.Abs(got-tc.want) > 1e-4 {
			t.Errorf("%s: %v %v, want %v", tc.name, got, err, tc.want)
		}
	}
	if _, err := PSNR([]float32{1}, []float32{1, 2}); err == nil {
		t.Error("length mismatch accepted")
	}
}

func TestSSIM(t *testing.T) {
	const c, h, w = 1, 12, 12
	ramp := make([]float32, c*h*w)
	for i := range ramp {
		ramp[i] = float32(i%w) / w
	}
	same, err := SSIM(ramp, ramp, c, h, w)
	if err != nil || math.Abs(same-1) > 1e-9 {
		t.Fatalf("identical: %v %v", same, err)
	}
	zeros, ones := make([]float32, c*h*w), make([]float32, c*h*w)
	for i := range ones {
		ones[i] = 1
	}
	// Constant images: SSIM = (2·0·1 + C1)(0 + C2) / ((0 + 1 + C1)(0 + C2)) = C1 / (1 + C1).
	got, _ := SSIM(zeros, ones, c, h, w)
	if want := ssimC1 / (1 + ssimC1); math.Abs(got-want) > 1e-12 {
		t.Fatalf("black vs white: %v, want %v", got, want)
	}
	// Inverted ramp: negative structure correlation gives SSIM < 0.
	inv := make([]float32, len(ramp))
	for i, v := range ramp {
		inv[i] = 1 - v
	}
	if got, _ := SSIM(ramp, inv, c, h, w); !(got < 0) {
		t.Fatalf("inverted ramp: %v, want < 0", got)
	}
}

func TestRunBaselines(t *testing.T) {
	// A generator that returns the truth scores MaxPSNR and SSIM 1; repeat-first scores less.
	perfect := func(_ context.Context, _ image.Image, sample int64) (*tensor.Dense, error) {
		tr, _ := Truth(procedural.DefaultConfig(), 1, int(sample))
		return tr, nil
	}
	rep, err := Run(context.Background(), Options{Samples: 2, DataSeed: 1, Rule: procedural.DefaultRule, Steps: 1}, perfect, perfect, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.PSNRAfterFirst != MaxPSNR || math.Abs(rep.SSIMAfterFirst-1) > 1e-9 || rep.UntrainedPSNR != MaxPSNR {
		t.Fatalf("perfect generator: %+v", rep)
	}
	if !(rep.RepeatPSNRAfterFirst < 40) || rep.RepeatPSNR.PerFrame[0] != MaxPSNR {
		t.Fatalf("repeat-first baseline %v (frame 1 %v)", rep.RepeatPSNRAfterFirst, rep.RepeatPSNR.PerFrame[0])
	}
	if len(rep.PSNR.PerFrame) != 14 {
		t.Fatalf("%d frames", len(rep.PSNR.PerFrame))
	}
	if got := MeanAfterFirst([]float64{100, 1, 2, 3}); got != 2 {
		t.Fatalf("MeanAfterFirst = %v", got)
	}
}

func TestRunSplit(t *testing.T) {
	// A generator that returns training clip i is perfect on the training split and not on
	// the held-out one, so Run must score the split it was asked for.
	trainClip := func(_ context.Context, _ image.Image, sample int64) (*tensor.Dense, error) {
		tr, _ := SplitTruth(procedural.DefaultConfig(), 1, procedural.Train, int(sample))
		return tr, nil
	}
	for _, tc := range []struct {
		train     bool
		wantSplit string
		perfect   bool
	}{
		{train: true, wantSplit: "train", perfect: true},
		{train: false, wantSplit: "heldout", perfect: false},
	} {
		o := Options{Samples: 2, DataSeed: 1, Rule: procedural.DefaultRule, Steps: 1, TrainSplit: tc.train}
		rep, err := Run(context.Background(), o, trainClip, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Split != tc.wantSplit || (rep.PSNRAfterFirst == MaxPSNR) != tc.perfect {
			t.Errorf("TrainSplit %v: split %q, PSNR %v; want split %q, perfect %v", tc.train, rep.Split, rep.PSNRAfterFirst, tc.wantSplit, tc.perfect)
		}
	}
}

// TestRunReference: with a reference generator every clip is scored against it; a model
// equal to its reference scores MaxPSNR and SSIM 1 there, and the reference's own scores
// against the truth are reported; the worst clip is kept.
func TestRunReference(t *testing.T) {
	truth := func(_ context.Context, _ image.Image, sample int64) (*tensor.Dense, error) {
		tr, _ := Truth(procedural.DefaultConfig(), 1, int(sample))
		return tr, nil
	}
	// The model repeats the first frame on clip 1 only.
	model := func(ctx context.Context, img image.Image, sample int64) (*tensor.Dense, error) {
		tr, err := truth(ctx, img, sample)
		if sample == 1 {
			return RepeatFirst(tr), err
		}
		return tr, err
	}
	o := Options{Samples: 2, DataSeed: 1, Rule: procedural.DefaultRule, Steps: 1, Reference: truth}
	rep, err := Run(context.Background(), o, model, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Reference
	if r == nil || r.TruthPSNRAfterFirst != MaxPSNR || math.Abs(r.TruthSSIMAfterFirst-1) > 1e-9 {
		t.Fatalf("reference scores %+v", r)
	}
	if r.PSNRAfterFirst != rep.PSNRAfterFirst || r.MinPSNRAfterFirst != rep.Clips[1].PSNRAfterFirst || !(r.MinPSNRAfterFirst < MaxPSNR) {
		t.Fatalf("against the reference (= the truth): %v, worst %v; against the truth %v, clip 1 %v",
			r.PSNRAfterFirst, r.MinPSNRAfterFirst, rep.PSNRAfterFirst, rep.Clips[1].PSNRAfterFirst)
	}
	if rep, _ := Run(context.Background(), Options{Samples: 1, DataSeed: 1, Rule: procedural.DefaultRule, Steps: 1}, model, nil, nil); rep.Reference != nil {
		t.Fatal("a reference score without a reference")
	}
}

func TestNewCacheReport(t *testing.T) {
	c := NewCacheReport("static steps 0,2", Stats{Videos: 2, Diffusion: 2 * time.Second, ComputedCalls: 6, Calls: 20},
		Stats{Videos: 2, Diffusion: 5 * time.Second})
	if c.SavedCalls != 0.7 || c.Speedup != 2.5 || c.DiffusionS != 2 || c.ReferenceDiffusion != 5 || c.Rule != "static steps 0,2" {
		t.Fatalf("%+v", c)
	}
	if c := NewCacheReport("none", Stats{}, Stats{}); c.SavedCalls != 0 || c.Speedup != 0 {
		t.Fatalf("empty stats: %+v", c)
	}
}
