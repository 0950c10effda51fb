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

// wan-dev: every case has a runner and every tensor of every case is within its limit
// (transformers, VAE, schedulers, the whole two-expert pipeline).
func TestWanDev(t *testing.T) {
	dir := shared.Require(t, "golden", "wan-dev")
	rep, err := Run(context.Background(), dir, goldentest.Backend(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", rep.Table())
	if err := rep.Err(); err != nil || !rep.Pass {
		t.Fatalf("%v", err)
	}
	for _, r := range rep.Results {
		if r.Status != StatusUnchecked && strings.HasPrefix(r.Case, "transformer") && r.RelL2 > 1e-5 {
			t.Errorf("%s/%s: rel L2 %.3g > 1e-5", r.Case, r.Tensor, r.RelL2)
		}
	}
	// Every output tensor of every case is reported.
	want := goldentest.CountOutputs(t, dir)
	if len(rep.Results) != want || rep.Checked() != want {
		t.Fatalf("reported %d tensors (%d checked), the cases hold %d", len(rep.Results), rep.Checked(), want)
	}
}

// linkFolder links wan-dev's components into a new folder with no cases.
func linkFolder(t *testing.T) (src, dir string) {
	t.Helper()
	src = shared.Require(t, "golden", "wan-dev")
	return src, goldentest.LinkComponents(t, src, "model_index.json", "transformer", "transformer_2", "vae", "scheduler")
}

// A case kind without a runner is listed as not yet checked and fails the report, never
// passes silently.
func TestUnknownCaseNotChecked(t *testing.T) {
	src, dir := linkFolder(t)
	cd := filepath.Join(dir, "cases", "some_future_case")
	if err := os.MkdirAll(cd, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cd, "case.json"), []byte(`{"case": "some_future_case"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(src, "cases", "transformer_forward", "outputs.safetensors"), filepath.Join(cd, "outputs.safetensors")); err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), dir, goldentest.Backend(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	err = rep.Err()
	if !errors.Is(err, ErrUnchecked) || errors.Is(err, ErrFailed) || rep.Pass || rep.Checked() != 0 ||
		!strings.Contains(rep.Table(), "not yet checked") {
		t.Fatalf("unknown case: Err %v, Pass %v\n%s", err, rep.Pass, rep.Table())
	}
}

// A perturbed reference output fails: the check is not a formality.
func TestPerturbedReferenceFails(t *testing.T) {
	src, dir := linkFolder(t)
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

// wan-dev-cache: diffusers' First Block Cache on both experts. Every call's decision is
// exact (20 of the 32 calls skip the remaining blocks), and every stored tensor, the
// uncached run's included, is within its limit.
func TestWanDevCache(t *testing.T) {
	dir := shared.Require(t, "golden", "wan-dev-cache")
	rep, err := Run(context.Background(), dir, goldentest.Backend(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", rep.Table())
	if err := rep.Err(); err != nil || !rep.Pass {
		t.Fatalf("%v", err)
	}
	if want := goldentest.CountOutputs(t, dir); len(rep.Results) != want || rep.Checked() != want {
		t.Fatalf("reported %d tensors (%d checked), the cases hold %d", len(rep.Results), rep.Checked(), want)
	}
	for _, r := range rep.Results {
		if r.Tensor == "computed" && (r.Limit != "exact" || !r.Pass) {
			t.Fatalf("decisions: %+v", r)
		}
	}
}
