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
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/safetensors"
	"github.com/vdpp/vdpp/tensor"
)

// The golden dev folders pass: every stored tensor is compared and within tolerance (dev:
// the networks and diffusers' loop; dev-deepcache: DeepCache's SVD loop, interval 3,
// branch 0, its decisions exact).
func TestGoldenDevPasses(t *testing.T) {
	for _, name := range []string{"dev", "dev-deepcache"} {
		t.Run(name, func(t *testing.T) {
			dir := shared.Require(t, "golden", name)
			b, err := nn.NewBackend("")
			if err != nil {
				t.Fatal(err)
			}
			rep, err := Run(context.Background(), dir, b, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := rep.Err(); err != nil {
				t.Fatalf("%v\n%s", err, rep.Table())
			}
			// Every output tensor of every case was compared.
			if want := goldentest.CountOutputs(t, dir); len(rep.Results) != want {
				t.Fatalf("compared %d tensors, the cases hold %d", len(rep.Results), want)
			}
			t.Logf("\n%s", rep.Table())
		})
	}
}

// A folder whose reference was perturbed, or which holds an output the runner cannot
// compute, fails: the check is not a formality.
func TestPerturbedReferenceFails(t *testing.T) {
	src := shared.Require(t, "golden", "dev")
	dir := goldentest.LinkComponents(t, src, "model_index.json", "unet", "vae", "image_encoder", "scheduler", "feature_extractor")
	caseDir := filepath.Join(dir, "cases", "clip_image_embeds")
	if err := os.MkdirAll(caseDir, 0o755); err != nil {
		t.Fatal(err)
	}
	orig := filepath.Join(src, "cases", "clip_image_embeds")
	for _, f := range []string{"case.json", "inputs.safetensors"} {
		b, _ := os.ReadFile(filepath.Join(orig, f))
		os.WriteFile(filepath.Join(caseDir, f), b, 0o644)
	}
	out, err := safetensors.Open(filepath.Join(orig, "outputs.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	var ts []safetensors.NamedTensor
	for _, n := range out.Names() {
		x, _ := out.Tensor(n)
		if n == "image_embeds" {
			x.Data[0] += 0.05 // a perturbation far above the tolerance
		}
		ts = append(ts, safetensors.NamedTensor{Name: n, Tensor: x})
	}
	out.Close()
	ts = append(ts, safetensors.NamedTensor{Name: "something_new", Tensor: tensor.New(2)})
	if err := safetensors.WriteFile(filepath.Join(caseDir, "outputs.safetensors"), ts, nil); err != nil {
		t.Fatal(err)
	}
	b, _ := nn.NewBackend("")
	rep, err := Run(context.Background(), dir, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(rep.Err(), ErrFailed) {
		t.Fatalf("perturbed reference passed:\n%s", rep.Table())
	}
	failed := map[string]bool{}
	for _, r := range rep.Results {
		if !r.Pass {
			failed[r.Tensor] = true
		}
	}
	if !failed["image_embeds"] || !failed["something_new"] || failed["last_hidden_state"] {
		t.Fatalf("wrong failures %v:\n%s", failed, rep.Table())
	}
	if !strings.Contains(rep.Table(), "not computed") {
		t.Fatalf("an uncomputable output is not reported as such:\n%s", rep.Table())
	}
}
