package transformer_test

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/vdpp/vdpp/internal/goldentest"
	"github.com/vdpp/vdpp/model/wan/transformer"
	"github.com/vdpp/vdpp/model/wan/wantest"
	"github.com/vdpp/vdpp/tensor"
	"github.com/vdpp/vdpp/tensor/quant"
)

var updateSDCpp = flag.Bool("update-sdcpp", false, "remake testdata/sdcpp/transformer-q8_0.gguf with stable-diffusion.cpp's own convert: $SDCPP_CLI is an sd-cli binary built from a stable-diffusion.cpp checkout")

const sdcppSeed = 2026

// TestSDCppConvert: testdata/sdcpp/transformer-q8_0.gguf was written by stable-diffusion.cpp's
// real convert (`sd-cli -M convert --diffusion-model ORIGINAL.safetensors --type q8_0`) from
// random weights in Wan's original layout; vdpp reads it (its names, its 4-dim convolution,
// its modulations without their outer 1) held in q8_0, and wantest's SDCppGGUF writes the
// same bytes from the same weights, so the tests that write files "the sd.cpp way" write
// what sd.cpp writes.
func TestSDCppConvert(t *testing.T) {
	dir := filepath.Join("testdata", "sdcpp")
	fixture := filepath.Join(dir, "transformer-q8_0.gguf")
	cfg, err := transformer.ReadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	weights := wantest.RandomWeights(t, cfg, sdcppSeed)
	if *updateSDCpp {
		cli := os.Getenv("SDCPP_CLI")
		if cli == "" {
			t.Fatal("-update-sdcpp needs SDCPP_CLI, an sd-cli binary")
		}
		orig := filepath.Join(t.TempDir(), "original.safetensors")
		wantest.WriteTransformerFile(t, weights, orig, wantest.OriginalSafetensors, quant.F32)
		out, err := exec.Command(cli, "-M", "convert", "--diffusion-model", orig, "-o", fixture, "--type", "q8_0").CombinedOutput()
		if err != nil {
			t.Fatalf("sd-cli convert: %v\n%s", err, out)
		}
	}
	ours := filepath.Join(t.TempDir(), "ours.gguf")
	wantest.WriteTransformerFile(t, weights, ours, wantest.SDCppGGUF, quant.Q8_0)
	a, err := os.ReadFile(fixture)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(ours)
	if !bytes.Equal(a, b) {
		t.Errorf("wantest's SDCppGGUF writes %d bytes, stable-diffusion.cpp's convert %d: not the same file", len(b), len(a))
	}
	backend := goldentest.Backend(t)
	m, err := transformer.LoadWith(dir, transformer.LoadOptions{File: fixture}, backend)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if h := m.HeldBytes(); h[quant.Q8_0] == 0 {
		t.Errorf("held %v: nothing in q8_0", h)
	}
	f32, err := transformer.New(cfg, weights, backend)
	if err != nil {
		t.Fatal(err)
	}
	defer f32.Close()
	x, ts, ehs := tensor.New(1, 4, 1, 4, 4), &tensor.Dense{Shape: []int{1}, Data: []float32{500}}, tensor.New(1, 3, 32)
	for i := range x.Data {
		x.Data[i] = float32(i%7) - 3
	}
	for i := range ehs.Data {
		ehs.Data[i] = float32(i%5) / 5
	}
	got, err := m.Forward(x, ts, ehs, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, err := f32.Forward(x, ts, ehs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rel := tensor.RelL2(got, want); rel == 0 || rel > 2e-2 {
		t.Errorf("sd.cpp's q8_0 file against the float32 weights: relative L2 %.3g, want in (0, 2e-2]", rel)
	}
}
