package unet

import (
	"testing"
	"time"

	"github.com/vdpp/vdpp/tensor"
)

// TestGoldenForward compares one UNet call on the dev checkpoint with diffusers' output.
func TestGoldenForward(t *testing.T) {
	ck := devCheckpoint(t)
	m := devModel(t, "")
	in := readCase(t, ck, "unet_forward", "inputs")
	ref := readCase(t, ck, "unet_forward", "outputs")["sample_out"]
	start := time.Now()
	got, err := m.Forward(in["sample"], in["timestep"], in["encoder_hidden_states"], in["added_time_ids"])
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("first forward (compile + run) %v", time.Since(start))
	if !tensor.SameShape(got, ref) {
		t.Fatalf("shape %v, want %v", got.Shape, ref.Shape)
	}
	rel := tensor.RelL2(got, ref)
	t.Logf("unet_forward: rel L2 %.3g, max abs %.3g", rel, tensor.MaxAbsDiff(got, ref))
	if rel > 1e-4 {
		t.Fatalf("rel L2 %.3g > 1e-4", rel)
	}
}
