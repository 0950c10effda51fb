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

// wan-dev: the three transformer cases pass; every other tensor is listed as not yet
// checked, and the report does not pass.
func TestWanDev(t *testing.T) {
	dir := shared.Require(t, "golden", "wan-dev")
	rep, err := Run(context.Background(), dir, goldentest.Backend(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", rep.Table())
	checked := map[string]bool{}
	for _, r := range rep.Results {
		if strings.HasPrefix(r.Case, "transformer") {
			if r.Status != StatusOK || r.RelL2 > 1e-5 {
				t.Errorf("%s/%s: %s rel L2 %.3g %s", r.Case, r.Tensor, r.Status, r.RelL2, r.Error)
			}
			checked[r.Case] = true
		} else if r.Status != StatusUnchecked && runners[r.Case] == nil {
			t.Errorf("%s/%s: status %s for a case without a runner", r.Case, r.Tensor, r.Status)
		}
	}
	if len(checked) != 3 {
		t.Errorf("transformer cases checked: %v", checked)
	}
	// Every output tensor of every case is reported.
	want := 0
	cases, _ := ListCases(dir)
	for _, c := range cases {
		f, err := safetensors.Open(filepath.Join(c, "outputs.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		want += len(f.Names())
		f.Close()
	}
	if len(rep.Results) != want {
		t.Fatalf("reported %d tensors, the cases hold %d", len(rep.Results), want)
	}
	err = rep.Err()
	if len(Kinds()) < len(cases) && (err == nil || !errors.Is(err, ErrUnchecked) || errors.Is(err, ErrFailed) || rep.Pass) {
		t.Fatalf("with unchecked cases: Err %v, Pass %v", err, rep.Pass)
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
