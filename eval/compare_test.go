package eval

import (
	"bytes"
	"context"
	"errors"
	"image"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/data/procedural"
	"github.com/vdpp/vdpp/tensor"
)

// TestRunClipScores: the per-clip scores are each clip's own, and they average to the
// report's means.
func TestRunClipScores(t *testing.T) {
	// Perfect on even clips, repeat-first on odd ones.
	gen := func(_ context.Context, _ image.Image, sample int64) (*tensor.Dense, error) {
		tr, _ := Truth(procedural.DefaultConfig(), 1, int(sample))
		if sample%2 == 1 {
			return RepeatFirst(tr), nil
		}
		return tr, nil
	}
	rep, err := Run(context.Background(), Options{Samples: 4, DataSeed: 1, Rule: procedural.DefaultRule, Steps: 1, Seed: 7}, gen, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Clips) != 4 || rep.Rule != procedural.DefaultRule.String() || rep.DataSeed != 1 || rep.Seed != 7 {
		t.Fatalf("report: %d clips, rule %q, data seed %d, seed %d", len(rep.Clips), rep.Rule, rep.DataSeed, rep.Seed)
	}
	var ps, ss float64
	for i, c := range rep.Clips {
		if c.Index != i {
			t.Fatalf("clip %d has index %d", i, c.Index)
		}
		if even := i%2 == 0; even != (c.PSNRAfterFirst == MaxPSNR) {
			t.Errorf("clip %d: PSNR %v (even clips are perfect)", i, c.PSNRAfterFirst)
		}
		if i%2 == 1 && c.PSNRAfterFirst != c.RepeatPSNRAfterFirst {
			t.Errorf("clip %d repeats its first frame: PSNR %v, baseline %v", i, c.PSNRAfterFirst, c.RepeatPSNRAfterFirst)
		}
		ps += c.PSNRAfterFirst / 4
		ss += c.SSIMAfterFirst / 4
	}
	if math.Abs(ps-rep.PSNRAfterFirst) > 1e-9 || math.Abs(ss-rep.SSIMAfterFirst) > 1e-9 {
		t.Fatalf("clip means %v / %v, report %v / %v", ps, ss, rep.PSNRAfterFirst, rep.SSIMAfterFirst)
	}
}

func report(model string, psnr ...float64) Report {
	r := Report{Model: model, Split: "heldout", Rule: "heading", DataSeed: 1, Steps: 25}
	for i, p := range psnr {
		r.Clips = append(r.Clips, ClipScore{Index: i, PSNRAfterFirst: p, SSIMAfterFirst: p / 100})
	}
	return r
}

func TestCompare(t *testing.T) {
	a := report("a", 10, 20, 30, 40)
	b := report("b", 11, 23, 29, 42) // differences 1, 3, -1, 2
	c, err := Compare(a, b)
	if err != nil {
		t.Fatal(err)
	}
	// mean 1.25; sample variance ((−.25)²+1.75²+(−2.25)²+.75²)/3 = 2.9167; stderr √(2.9167/4).
	wantSE := math.Sqrt(8.75 / 3 / 4)
	if c.PSNR.N != 4 || math.Abs(c.PSNR.Diff-1.25) > 1e-12 || math.Abs(c.PSNR.StdErr-wantSE) > 1e-12 ||
		c.PSNR.BWins != 3 || c.PSNR.MeanA != 25 || c.PSNR.MeanB != 26.25 {
		t.Fatalf("PSNR %+v, want diff 1.25, stderr %v, 3 wins", c.PSNR, wantSE)
	}
	if math.Abs(c.SSIM.Diff-0.0125) > 1e-12 {
		t.Fatalf("SSIM diff %v", c.SSIM.Diff)
	}
	var buf bytes.Buffer
	if err := c.Write(&buf); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"A: a, 25 steps", "B: b,", "4 heldout clips", "PSNR dB  25.000   26.250   +1.250", "3/4"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, buf.String())
		}
	}

	// Only the clips both scored are paired.
	short := report("s", 0, 0, 5, 7)
	short.Clips = short.Clips[2:]
	c, err = Compare(a, short)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Clips) != 2 || c.Clips[0] != 2 || c.PSNR.Diff != -29 {
		t.Fatalf("paired clips %v, diff %v; want [2 3], -29", c.Clips, c.PSNR.Diff)
	}
}

// TestCompareSettingDiffs: two models compared under different sampling settings get a
// warning naming each setting; two settings of one model, or two models under the same
// settings, get none.
func TestCompareSettingDiffs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		model string // B's model (A's is "a")
		edit  func(r *Report)
		want  []string
	}{
		{"same settings", "b", func(*Report) {}, nil},
		{"guidance", "b", func(r *Report) { r.MinGuidance, r.MaxGuidance = 1, 3 }, []string{"guidance 2-4 vs 1-3"}},
		{"chunk and steps", "b", func(r *Report) { r.DecodeChunk, r.Steps = 0, 50 }, []string{"steps 25 vs 50", "decode chunk 7-frame chunks vs all frames"}},
		{"seed and frames", "b", func(r *Report) { r.Seed, r.Frames = 3, 7 }, []string{"seed 0 vs 3", "frames 14 vs 7"}},
		{"one model, two settings", "a", func(r *Report) { r.MinGuidance = 1 }, []string{"guidance 2-4 vs 1-4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := report("a", 1, 2, 3), report(tc.model, 2, 3, 4)
			for _, r := range []*Report{&a, &b} {
				r.MinGuidance, r.MaxGuidance, r.DecodeChunk, r.Frames = 2, 4, 7, 14
			}
			tc.edit(&b)
			c, err := Compare(a, b)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.SettingDiffs(); strings.Join(got, "; ") != strings.Join(tc.want, "; ") {
				t.Fatalf("SettingDiffs = %q, want %q", got, tc.want)
			}
			var buf bytes.Buffer
			if err := c.Write(&buf); err != nil {
				t.Fatal(err)
			}
			warned := strings.HasPrefix(buf.String(), "warning: the reports differ in model and in ")
			if wantWarn := tc.model != "a" && len(tc.want) > 0; warned != wantWarn {
				t.Fatalf("warning printed: %v, want %v:\n%s", warned, wantWarn, buf.String())
			}
			for _, d := range tc.want {
				if warned && !strings.Contains(buf.String(), d) {
					t.Errorf("warning lacks %q:\n%s", d, buf.String())
				}
			}
		})
	}
}

func TestCompareIncomparable(t *testing.T) {
	base := report("a", 1, 2, 3)
	for _, tc := range []struct {
		name string
		edit func(r *Report)
		want string
	}{
		{"no clips", func(r *Report) { r.Clips = nil }, "no per-clip scores"},
		{"split", func(r *Report) { r.Split = "train" }, "split"},
		{"rule", func(r *Report) { r.Rule = "colour" }, "rule"},
		{"dataset", func(r *Report) { r.DataSeed = 2 }, "dataset seed"},
		{"one shared clip", func(r *Report) { r.Clips = r.Clips[2:] }, "1 clips scored by both"},
		{"a clip twice", func(r *Report) { r.Clips[1].Index = 0 }, "b scores clip 0 twice"},
	} {
		b := report("b", 1, 2, 3)
		tc.edit(&b)
		_, err := Compare(base, b)
		if !errors.Is(err, ErrIncomparable) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Compare error %v, want ErrIncomparable naming %q", tc.name, err, tc.want)
		}
	}
}

func TestReportJSONRoundTrip(t *testing.T) {
	r := report("m", 12.5, 14)
	path := t.TempDir() + "/r.json"
	if err := r.WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	got, err := ReadReport(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Clips) != 2 || got.Clips[1].PSNRAfterFirst != 14 || got.Rule != "heading" || got.DataSeed != 1 {
		t.Fatalf("read back %+v", got)
	}
	if _, err := ReadReport(t.TempDir() + "/missing.json"); err == nil {
		t.Fatal("a missing report reads without error")
	}
}

// FuzzCompare: any two JSON documents parse or fail cleanly, and a comparison that
// succeeds is antisymmetric (its setting differences too) and prints.
func FuzzCompare(f *testing.F) {
	f.Add([]byte(`{"split":"heldout","clips":[{"index":0,"psnr_after_first":1},{"index":1,"psnr_after_first":2}]}`),
		[]byte(`{"split":"heldout","clips":[{"index":1,"psnr_after_first":4},{"index":0,"psnr_after_first":3},{"index":0}]}`))
	f.Add([]byte(`{}`), []byte(`{"clips":null}`))
	f.Fuzz(func(t *testing.T, x, y []byte) {
		a, err := ParseReport(x)
		if err != nil {
			return
		}
		b, err := ParseReport(y)
		if err != nil {
			return
		}
		ab, err := Compare(a, b)
		if err != nil {
			if !errors.Is(err, ErrIncomparable) {
				t.Fatalf("error %v is not ErrIncomparable", err)
			}
			return
		}
		ba, err := Compare(b, a)
		if err != nil {
			t.Fatalf("Compare(a, b) works but Compare(b, a): %v", err)
		}
		if ab.PSNR.N < 2 || ab.PSNR.N != ba.PSNR.N || math.Abs(ab.PSNR.Diff+ba.PSNR.Diff) > 1e-9*(1+math.Abs(ab.PSNR.Diff)) {
			t.Fatalf("not antisymmetric: %+v vs %+v", ab.PSNR, ba.PSNR)
		}
		if len(ab.SettingDiffs()) != len(ba.SettingDiffs()) {
			t.Fatalf("setting differences %q one way, %q the other", ab.SettingDiffs(), ba.SettingDiffs())
		}
		if err := ab.Write(io.Discard); err != nil {
			t.Fatal(err)
		}
	})
}
