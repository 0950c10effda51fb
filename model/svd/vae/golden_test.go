package vae

import (
	"testing"

	"github.com/vdpp/vdpp/tensor"
)

// parityTol is the relative L2 error the golden cases must meet (fp32 reference).
const parityTol = 1e-4

func TestGoldenEncode(t *testing.T) {
	ck := openGolden(t)
	m, err := LoadParts(ck, "", backend(t), true, false)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	in, want := goldenCase(t, "vae_encode")
	p, err := m.Encode(in["image"])
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		got  *tensor.Dense
	}{
		{"moments", p.Moments}, {"mean", p.Mean}, {"mode", p.Mode()}, {"logvar", p.LogVar}, {"std", p.Std},
	} {
		checkClose(t, c.name, c.got, want[c.name], parityTol)
	}
	if len(want) != 5 {
		t.Errorf("outputs.safetensors holds %d tensors, the test compares 5", len(want))
	}
}

func TestGoldenDecode(t *testing.T) {
	ck := openGolden(t)
	m, err := LoadParts(ck, "", backend(t), false, true)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	in, want := goldenCase(t, "vae_decode")
	got, err := m.Decode(in["latents"], 0)
	if err != nil {
		t.Fatal(err)
	}
	checkClose(t, "frames", got, want["frames"], parityTol)
}
