package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/builtin"
)

// TestTrainInitFromBuiltinRoundTrip: a UNet phase seeded from the shipped model on a fresh
// run folder (no VAE checkpoint of its own) and exported unchanged gives the shipped
// weights and sampling defaults back byte for byte, so `--init-from builtin` continues
// exactly what ships and `--model OUT` samples as `--model builtin`.
func TestTrainInitFromBuiltinRoundTrip(t *testing.T) {
	dir, out := filepath.Join(t.TempDir(), "run"), filepath.Join(t.TempDir(), "model")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"train", "--dir", dir, "--phase", "unet", "--init-from", "builtin", "--steps", "0"}, &stdout, &stderr); code != 0 {
		t.Fatalf("train: exit %d\n%s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "nothing to train") || !strings.Contains(stderr.String(), "frozen VAE taken from") {
		t.Fatalf("train output does not say what it did:\nstdout: %s\nstderr: %s", stdout.String(), stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"train", "--dir", dir, "--export", out, "--export-only"}, &stdout, &stderr); code != 0 {
		t.Fatalf("export: exit %d\n%s", code, stderr.String())
	}
	shipped, err := builtin.Dir()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"unet/diffusion_pytorch_model.safetensors", "vae/diffusion_pytorch_model.safetensors", "image_encoder/model.safetensors", "vdpp_sampling.json"} {
		got, err := os.ReadFile(filepath.Join(out, f))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join(shipped, f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: the export of the seeded run differs from the shipped file", f)
		}
	}
}

// TestTrainLRDecayFlags: a decay that would start at or after --steps is refused with a
// message naming it, before anything is written.
func TestTrainLRDecayFlags(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	var stdout, stderr bytes.Buffer
	code := run([]string{"train", "--dir", dir, "--steps", "10", "--lr-final", "1e-5", "--lr-decay-start", "10"}, &stdout, &stderr)
	if code == 0 || !strings.Contains(stderr.String(), "lr decay starts at step 10") {
		t.Fatalf("exit %d, stderr %q: want a failure naming the decay start", code, stderr.String())
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the refused run left %s behind (%v)", dir, err)
	}
}
