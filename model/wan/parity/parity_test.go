package parity

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/internal/goldentest"
	"github.com/vdpp/vdpp/internal/shared"
	"github.com/vdpp/vdpp/safetensors"
)

// wan-dev: every case is checked (transformers, VAE, schedulers, the whole pipeline through
// the Wan family) and every tensor passes.
func TestWanDev(t *testing.T) {
	dir := shared.Require(t, "golden", "wan-dev")
	rep, err := Run(context.Background(), dir, goldentest.Backend(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", rep.Table())
	cases := map[string]bool{}
	for _, r := range rep.Results {
		cases[r.Case] = true
		if r.Status != StatusOK {
			t.Errorf("%s/%s: %s rel L2 %.3g %s", r.Case, r.Tensor, r.Status, r.RelL2, r.Error)
		}
		if strings.HasPrefix(r.Case, "transformer") && r.RelL2 > 1e-5 {
			t.Errorf("%s/%s: rel L2 %.3g > 1e-5", r.Case, r.Tensor, r.RelL2)
		}
		switch r.Tensor {
		case "timesteps", "experts":
			if r.Case == "full_pipeline_moe" && r.MaxAbs != 0 {
				t.Errorf("%s/%s: not exact (max |diff| %g)", r.Case, r.Tensor, r.MaxAbs)
			}
		case "frames":
			if r.MaxAbs > 1e-4 {
				t.Errorf("%s/%s: max |diff| %g > 1e-4", r.Case, r.Tensor, r.MaxAbs)
			}
		}
	}
	// Every output tensor of every case is reported.
	want := 0
	all, _ := ListCases(dir)
	for _, c := range all {
		f, err := safetensors.Open(filepath.Join(c, "outputs.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		want += len(f.Names())
		f.Close()
	}
	if len(rep.Results) != want || len(cases) != len(all) {
		t.Fatalf("reported %d tensors of %d cases, the folder holds %d of %d", len(rep.Results), len(cases), want, len(all))
	}
	if err := rep.Err(); err != nil || !rep.Pass {
		t.Fatalf("Err %v, Pass %v", err, rep.Pass)
	}
}

// A perturbed reference output fails: the check is not a formality.
func TestPerturbedReferenceFails(t *testing.T) {
	src := shared.Require(t, "golden", "wan-dev")
	dir := t.TempDir()
	for _, name := range []string{"model_index.json", "transformer", "transformer_2", "vae", "scheduler"} {
		if err := os.Symlink(filepath.Join(src, name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	cd := filepath.Join(dir, "cases", "transformer_forward")
	if err := os.MkdirAll(cd, 0o755); err != nil {
		t.Fatal(err)
	}
	from := filepath.Join(src, "cases", "transformer_forward")
	for _, n := range []string{"case.json", "inputs.safetensors"} {
		if err := os.Symlink(filepath.Join(from, n), filepath.Join(cd, n)); err != nil {
			t.Fatal(err)
		}
	}
	out := goldentest.ReadTensors(t, filepath.Join(from, "outputs.safetensors"))["output"]
	bad := out.Clone()
	for i := range bad.Data {
		bad.Data[i] *= 1.001
	}
	if err := safetensors.WriteFile(filepath.Join(cd, "outputs.safetensors"), []safetensors.NamedTensor{{Name: "output", Tensor: bad}}, nil); err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), dir, goldentest.Backend(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.Err(); !errors.Is(err, ErrFailed) || rep.Pass {
		t.Fatalf("perturbed output passed: %v\n%s", err, rep.Table())
	}
}
