package wan

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/vdpp/vdpp/internal/shared"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/model/wan/transformer"
	"github.com/vdpp/vdpp/tensor"
	"github.com/vdpp/vdpp/train/finetune"
)

// testClip is a deterministic clip of 6 frames of 64x64 in [-1, 1].
func testClip(seed uint64) func(i int) *tensor.Dense {
	return func(i int) *tensor.Dense {
		r := rand.New(rand.NewPCG(seed, uint64(i)))
		t := tensor.New(6, 3, 64, 64)
		for j := range t.Data {
			t.Data[j] = float32(2*r.Float64() - 1)
		}
		return t
	}
}

func openTestFineTune(t *testing.T, expert int) *fineTune {
	t.Helper()
	b, err := nn.NewBackend("go")
	if err != nil {
		t.Fatal(err)
	}
	ft, err := wanFamily{}.FineTune(shared.Require(t, "golden", "wan-dev"), finetune.Options{Expert: expert, Seed: 5, Backend: b,
		Clips: finetune.Clips{Train: testClip(1), HeldOut: testClip(2), TrainCount: 2}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ft.Close() })
	return ft.(*fineTune)
}

// TestFineTuneExamples: an example's inputs do not depend on which others are drawn with
// it, the noise levels lie in the expert's range (wan-dev's boundary 0.875 of 1000
// timesteps), the latents are the VAE's for 5 of the 6 frames, and held-out examples are
// the same at every call.
func TestFineTuneExamples(t *testing.T) {
	for _, tc := range []struct {
		expert int
		lo, hi float32
	}{{0, 0, 0.875}, {2, 0, 0.875}, {1, 0.875, 1}} {
		ft := openTestFineTune(t, tc.expert)
		all, err := ft.Examples(7, 0, 4)
		if err != nil {
			t.Fatal(err)
		}
		if got := all[0].Shape; len(got) != 5 || got[1] != 4 || got[2] != 2 || got[3] != 8 || got[4] != 8 {
			t.Fatalf("x0 %v, want [4 4 2 8 8] (z, 1 + 4/4 latent frames, 64/8)", got)
		}
		one, err := ft.Examples(7, 2, 3)
		if err != nil {
			t.Fatal(err)
		}
		for i := range all {
			per := len(one[i].Data)
			if !tensor.BitEqual(one[i], &tensor.Dense{Shape: one[i].Shape, Data: all[i].Data[2*per : 3*per]}) {
				t.Fatalf("expert %d: input %d of example 2 differs when drawn alone", tc.expert, i)
			}
		}
		for _, s := range all[2].Data {
			if s < tc.lo || s >= tc.hi {
				t.Fatalf("expert %d: sigma %v outside [%v, %v)", tc.expert, s, tc.lo, tc.hi)
			}
		}
		if tc.expert != 0 {
			continue
		}
		h1, _ := ft.HeldOut(0, 2)
		h2, _ := ft.HeldOut(1, 2)
		per := len(h2[1].Data)
		if !tensor.BitEqual(h2[1], &tensor.Dense{Shape: h2[1].Shape, Data: h1[1].Data[per:]}) {
			t.Fatal("held-out example 1 differs between calls")
		}
	}
}

// TestFineTuneExport: the exported folder holds the given weights for the trained expert
// (loadable by the transformer) and links every other component to the original.
func TestFineTuneExport(t *testing.T) {
	ft := openTestFineTune(t, 2)
	w, err := ft.Weights()
	if err != nil {
		t.Fatal(err)
	}
	w["proj_out.bias"].Data[0] += 1
	out := filepath.Join(t.TempDir(), "tuned")
	if err := ft.Export(out, w); err != nil {
		t.Fatal(err)
	}
	f, err := Open(out)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := nn.NewBackend("go")
	if _, err := f.LoadTransformer(2, "", b); err != nil {
		t.Fatal(err)
	}
	exp, _ := transformer.ExpectedTensors(ft.cfg)
	ft2 := &fineTune{tdir: filepath.Join(out, Transformer2), cfg: ft.cfg}
	got, err := ft2.Weights()
	if err != nil || len(got) != len(exp) {
		t.Fatalf("exported weights: %d tensors (%v), want %d", len(got), err, len(exp))
	}
	if !tensor.BitEqual(got["proj_out.bias"], w["proj_out.bias"]) {
		t.Fatal("the exported expert does not hold the given weights")
	}
	if _, err := os.Stat(filepath.Join(out, FineTunePromptFile)); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{Transformer, VAE, Scheduler, "model_index.json"} {
		if fi, err := os.Lstat(filepath.Join(out, name)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Fatalf("%s is not a link to the original (%v)", name, err)
		}
	}
}
