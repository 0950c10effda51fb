package family_test

import (
	"context"
	"errors"
	"image"
	"image/color"
	"image/draw"
	"os"
	"path/filepath"
	"testing"

	_ "github.com/vdpp/vdpp/model/families"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/svd"
)

func TestResolve(t *testing.T) {
	r, err := family.Resolve("synthetic")
	if err != nil || r.Family.Name() != "synthetic" || r.Dir != "" {
		t.Fatalf("synthetic: %+v, %v", r, err)
	}
	r, err = family.Resolve("builtin")
	if err != nil || r.Family.Name() != svd.FamilyName || r.Dir == "" {
		t.Fatalf("builtin: %+v, %v", r, err)
	}
	if _, err := family.Resolve("svd"); !errors.Is(err, family.ErrUnknown) {
		t.Fatalf("svd without a folder: %v, want ErrUnknown", err)
	}
	if _, err := family.Resolve("no-such-model"); !errors.Is(err, family.ErrUnknown) {
		t.Fatalf("unknown name: %v", err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "model_index.json"), []byte(`{"_class_name": "SomeOtherPipeline"}`), 0o644)
	if _, err := family.Resolve(dir); !errors.Is(err, family.ErrUnknown) {
		t.Fatalf("folder of an unknown class: %v", err)
	}
}

// The simulators' sampler draws the benchmark's noise and steps through the engine.
func TestDenoisersSampler(t *testing.T) {
	s, err := family.Open("synthetic", family.Options{Roles: family.AllRoles})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := s.DefaultParams()
	p.NumFrames, p.Steps, p.Height, p.Width = 2, 3, 16, 16
	if err := s.Validate(p); err != nil {
		t.Fatal(err)
	}
	bad := p
	bad.Height = 12
	if err := s.Validate(bad); !errors.Is(err, family.ErrParams) {
		t.Fatalf("height 12: %v", err)
	}
	sc, err := s.Scheduler(p)
	if err != nil {
		t.Fatal(err)
	}
	it, err := s.Prepare(context.Background(), family.Input{}, p, sc, []int64{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := it.Latent.Shape; len(got) != 5 || got[0] != 2 || got[1] != 2 || got[2] != 4 || got[3] != 2 || len(it.Cond) != 2 || len(it.Guidance) != 2 {
		t.Fatalf("item %v, %d conds, guidance %v", got, len(it.Cond), it.Guidance)
	}
	st, err := s.Stepper(sc)
	if err != nil {
		t.Fatal(err)
	}
	for it.Step = 0; it.Step < p.Steps; it.Step++ {
		if err := st.Step(context.Background(), it); err != nil {
			t.Fatal(err)
		}
	}
	frames, err := s.Decode(context.Background(), it.Latent.Rows(0, 1), p)
	if err != nil {
		t.Fatal(err)
	}
	if got := frames.Shape; len(got) != 4 || got[0] != 2 || got[1] != 3 || got[2] != 16 || got[3] != 16 {
		t.Fatalf("decoded frames %v, want [2 3 16 16]", got)
	}
	for _, v := range frames.Data {
		if !(v > 0 && v < 1) {
			t.Fatalf("decoded value %v outside (0, 1)", v)
		}
	}
	p.Width = 24
	if _, err := s.Decode(context.Background(), it.Latent.Rows(0, 1), p); !errors.Is(err, family.ErrParams) {
		t.Fatalf("decode at the wrong size: %v, want ErrParams", err)
	}
}

// The simulators condition on an image's mean colour, so two images give two videos.
func TestDenoisersImageConditioning(t *testing.T) {
	s, err := family.Open("synthetic", family.Options{Roles: family.Roles{Condition: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := s.DefaultParams()
	sc, err := s.Scheduler(p)
	if err != nil {
		t.Fatal(err)
	}
	vec := func(c color.Color) []float32 {
		img := image.NewNRGBA(image.Rect(0, 0, 4, 4))
		draw.Draw(img, img.Bounds(), image.NewUniform(c), image.Point{}, draw.Src)
		it, err := s.Prepare(context.Background(), family.Input{Image: img}, p, sc, []int64{0})
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range it.Cond[0] {
			return v.Data
		}
		t.Fatal("no conditioning")
		return nil
	}
	white, black := vec(color.White), vec(color.Black)
	if white[0] != 1 || black[0] != -1 || white[3] != black[3] {
		t.Fatalf("white %v, black %v: want the colour in channels 0-2 (±1), the same noise after", white, black)
	}
}
