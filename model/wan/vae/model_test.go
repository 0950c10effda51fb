package vae

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/tensor"
)

// ramp returns a tensor of shape with values in about [-1, 1].
func ramp(shape ...int) *tensor.Dense {
	t := tensor.New(shape...)
	for i := range t.Data {
		t.Data[i] = float32(i%17-8) / 8
	}
	return t
}

func TestStreamEqualsWhole(t *testing.T) {
	v := load(t, filepath.Join("testdata", "config_b"))
	video := ramp(1, 3, 9, 16, 24)
	p, err := v.Encode(video)
	if err != nil {
		t.Fatal(err)
	}
	cache := v.NewEncodeCache()
	var parts []*tensor.Dense
	for _, r := range EncodeChunks(9) {
		m, err := v.EncodeChunk(cache, sliceTime(video, r[0], r[1]))
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, m)
	}
	m, _ := concatAxis(parts, 2)
	if !tensor.BitEqual(m, p.Moments) || cache.Chunks() != 3 {
		t.Errorf("streamed moments differ from Encode's (%d chunks)", cache.Chunks())
	}
	z := p.Mode()
	whole, err := v.Decode(z)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{1, 3, v.Config().VideoFrames(z.Shape[2]), 16, 24}; !slices.Equal(whole.Shape, want) {
		t.Fatalf("decoded %v, want %v", whole.Shape, want)
	}
	var sizes []int
	parts = nil
	err = v.DecodeStream(z, func(f *tensor.Dense) error {
		sizes = append(sizes, f.Shape[2])
		parts = append(parts, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := concatAxis(parts, 2)
	if !tensor.BitEqual(s, whole) || sizes[0] != 1 || sizes[1] != v.Config().TemporalFactor() {
		t.Errorf("stream chunks %v; equal to Decode: %v", sizes, tensor.BitEqual(s, whole))
	}
	for _, x := range whole.Data {
		if x < -1 || x > 1 {
			t.Fatalf("untiled decode not clamped: %v", x)
		}
	}
	stop := errors.New("stop")
	if err := v.DecodeStream(z, func(*tensor.Dense) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("yield's error: %v", err)
	}
}

// A frame no larger than one tile is decoded untiled, as in diffusers.
func TestTilingSmallFrameIsUntiled(t *testing.T) {
	v := load(t, filepath.Join("testdata", "tiled"))
	z := ramp(1, 4, 2, 4, 6)
	plain, err := v.Decode(z)
	if err != nil {
		t.Fatal(err)
	}
	vt, err := v.WithOptions(Options{Tiling: DefaultTiling()})
	if err != nil {
		t.Fatal(err)
	}
	tiled, err := vt.Decode(z)
	if err != nil {
		t.Fatal(err)
	}
	if !tensor.BitEqual(plain, tiled) {
		t.Error("a frame within one tile decoded differently with tiling on")
	}
}

func TestErrors(t *testing.T) {
	v := load(t, filepath.Join("testdata", "config_b"))
	if _, err := v.Encode(ramp(1, 3, 10, 16, 24)); !errors.Is(err, ErrFrames) || !strings.Contains(err.Error(), "1 + 4k") {
		t.Errorf("10 frames: %v", err)
	}
	if _, err := v.Encode(ramp(1, 3, 5, 18, 24)); !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "multiples of 4") {
		t.Errorf("height 18: %v", err)
	}
	if _, err := v.Encode(ramp(1, 4, 5, 16, 24)); !errors.Is(err, ErrInput) {
		t.Errorf("4 channels: %v", err)
	}
	if _, err := v.EncodeChunk(v.NewEncodeCache(), ramp(1, 3, 4, 16, 24)); !errors.Is(err, ErrFrames) {
		t.Errorf("first chunk of 4 frames: %v", err)
	}
	if _, err := v.DecodeFrame(v.NewDecodeCache(), ramp(1, 6, 2, 4, 6)); !errors.Is(err, ErrFrames) {
		t.Errorf("two latent frames: %v", err)
	}
	c := v.NewDecodeCache()
	if _, err := v.DecodeFrame(c, ramp(1, 6, 1, 4, 6)); err != nil {
		t.Fatal(err)
	}
	if _, err := v.DecodeFrame(c, ramp(1, 6, 1, 4, 8)); !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "does not continue") {
		t.Errorf("another frame size mid-stream: %v", err)
	}
	for _, tl := range []*Tiling{
		{MinHeight: 30, MinWidth: 32, StrideHeight: 16, StrideWidth: 16},
		{MinHeight: 32, MinWidth: 32, StrideHeight: 48, StrideWidth: 16},
		{MinHeight: 0, MinWidth: 32, StrideHeight: 16, StrideWidth: 16},
	} {
		if _, err := v.WithOptions(Options{Tiling: tl}); !errors.Is(err, ErrTiling) {
			t.Errorf("%v: %v", tl, err)
		}
	}
	ti2v := load(t, filepath.Join("testdata", "ti2v"))
	if _, err := ti2v.WithOptions(Options{Tiling: DefaultTiling()}); !errors.Is(err, ErrTiling) || !strings.Contains(err.Error(), "TI2V") {
		t.Errorf("tiling the TI2V variant: %v", err)
	}
}

func TestLoadErrors(t *testing.T) {
	b := backend(t)
	if _, err := Load(t.TempDir(), "", b); !errors.Is(err, ErrConfig) {
		t.Errorf("no config.json: %v", err)
	}
	dir := t.TempDir()
	cfg, err := os.ReadFile(filepath.Join("testdata", "config_b", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir, "fp16", b); !errors.Is(err, ErrWeights) || !strings.Contains(err.Error(), "diffusion_pytorch_model.fp16.safetensors") {
		t.Errorf("no weights: %v", err)
	}
	// Weights of another config: every mismatch is named.
	w, err := os.ReadFile(filepath.Join("testdata", "tiled", "diffusion_pytorch_model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "diffusion_pytorch_model.safetensors"), w, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir, "", b); !errors.Is(err, ErrWeights) || !strings.Contains(err.Error(), "decoder.conv_in.weight") {
		t.Errorf("weights of another config: %v", err)
	}
}
