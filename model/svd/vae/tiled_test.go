package vae

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/vdpp/vdpp/tensor"
)

// sizeOffset is 10·h + w of a tile [N, C, h, w], the stand-ins' size-dependent term.
func sizeOffset(t *tensor.Dense) float32 { return float32(10*t.Shape[2] + t.Shape[3]) }

// standInDecoder upsamples a tile ×2 (nearest) and adds sizeOffset, as the reference
// script's stand-in decoder does.
func standInDecoder(z *tensor.Dense) (*tensor.Dense, error) {
	n, c, h, w := z.Shape[0], z.Shape[1], z.Shape[2], z.Shape[3]
	out := tensor.New(n, c, 2*h, 2*w)
	off := sizeOffset(z)
	for p := 0; p < n*c; p++ {
		for y := 0; y < 2*h; y++ {
			for x := 0; x < 2*w; x++ {
				out.Data[(p*2*h+y)*2*w+x] = z.Data[(p*h+y/2)*w+x/2] + off
			}
		}
	}
	return out, nil
}

// standInEncoder takes every other pixel into both halves of the moments and adds
// sizeOffset, as the reference script's stand-in encoder does.
func standInEncoder(x *tensor.Dense) (*tensor.Dense, error) {
	n, c, h, w := x.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3]
	oh, ow := (h+1)/2, (w+1)/2
	out := tensor.New(n, 2*c, oh, ow)
	off := sizeOffset(x)
	for i := 0; i < n; i++ {
		for k := 0; k < 2*c; k++ {
			for y := 0; y < oh; y++ {
				for xx := 0; xx < ow; xx++ {
					out.Data[((i*2*c+k)*oh+y)*ow+xx] = x.Data[((i*c+k%c)*h+2*y)*w+2*xx] + off
				}
			}
		}
	}
	return out, nil
}

// TestTiledMatchesDiffusers runs diffusers' tiled_decode and _tiled_encode scheme (the
// reference, scripts/svd_tiled_vae_reference.py, executes AutoencoderKL's own methods)
// and vae's tiling on the same stand-in decoder and encoder.
func TestTiledMatchesDiffusers(t *testing.T) {
	ref := readTensors(t, "testdata/tiling.safetensors")
	for _, c := range []struct {
		sample  int
		overlap float64
	}{{8, 0.25}, {12, 0.25}, {8, 0.5}} {
		name := fmt.Sprintf("%d_%v", c.sample, c.overlap)
		dec, err := tiled(ref["latents"], c.sample/2, c.sample, c.overlap, standInDecoder)
		if err != nil {
			t.Fatal(err)
		}
		if want := ref["decode_"+name]; !tensor.BitEqual(dec, want) {
			t.Errorf("decode %s: shape %v (want %v), max abs diff %g", name, dec.Shape, want.Shape, maxAbsDiff(dec, want))
		}
		enc, err := tiled(ref["image"], c.sample, c.sample/2, c.overlap, standInEncoder)
		if err != nil {
			t.Fatal(err)
		}
		if want := ref["encode_"+name]; !tensor.BitEqual(enc, want) {
			t.Errorf("encode %s: shape %v (want %v), max abs diff %g", name, enc.Shape, want.Shape, maxAbsDiff(enc, want))
		}
	}
}

func maxAbsDiff(a, b *tensor.Dense) float64 {
	if !tensor.SameShape(a, b) {
		return math.Inf(1)
	}
	m := 0.0
	for i := range a.Data {
		m = max(m, math.Abs(float64(a.Data[i]-b.Data[i])))
	}
	return m
}

func TestTiledDecodeOnGolden(t *testing.T) {
	m, err := LoadParts(openGolden(t), "", backend(t), true, true)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	in, _ := goldenCase(t, "vae_decode")
	z := in["latents"] // [3, 4, 16, 16]: the dev VAE's factor is 2
	full, err := m.Decode(z, 0)
	if err != nil {
		t.Fatal(err)
	}
	tm, err := m.WithTiling(Tiling{Sample: 16, Overlap: DefaultTileOverlap})
	if err != nil {
		t.Fatal(err)
	}
	got, err := tm.Decode(z, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !tensor.SameShape(got, full) {
		t.Fatalf("tiled decode %v, untiled %v", got.Shape, full.Shape)
	}
	d := maxAbsDiff(got, full)
	t.Logf("tiles of 16 px: max abs diff to the untiled decode %.4g, PSNR %.1f dB", d, psnr(got, full))
	if d == 0 || d > 1 {
		t.Errorf("tiled decode differs from the untiled by %g: want a small nonzero difference", d)
	}
	// Tiles no smaller than the image: the untiled decode exactly.
	big, err := m.WithTiling(Tiling{Sample: 32, Overlap: DefaultTileOverlap})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := big.Decode(z, 0); err != nil || !tensor.BitEqual(got, full) {
		t.Errorf("a tile as large as the image changed the decode (%v)", err)
	}
	// Streaming and chunking go through the same tiles.
	chunked, err := tm.Decode(z, 2)
	if err != nil {
		t.Fatal(err)
	}
	var parts []*tensor.Dense
	if err := tm.DecodeChunks(z, 2, func(_ int, f *tensor.Dense) error { parts = append(parts, f.Clone()); return nil }); err != nil {
		t.Fatal(err)
	}
	if s, err := tensor.ConcatRows(parts); err != nil || !tensor.BitEqual(s, chunked) {
		t.Errorf("tiled DecodeChunks differs from tiled Decode (%v)", err)
	}
	// Encode: a 32×32 image in 16-pixel tiles.
	img := randomTensor(5, 1, 3, 32, 32)
	pf, err := m.Encode(img)
	if err != nil {
		t.Fatal(err)
	}
	pt, err := tm.Encode(img)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("encode in 16 px tiles: mean max abs diff %.4g", maxAbsDiff(pt.Mean, pf.Mean))
	if d := maxAbsDiff(pt.Mean, pf.Mean); d == 0 || d > 1 {
		t.Errorf("tiled encode mean differs by %g", d)
	}
}

// psnr is the PSNR in dB of a against b for frames in [-1, 1] (peak-to-peak 2).
func psnr(a, b *tensor.Dense) float64 {
	var se float64
	for i := range a.Data {
		d := float64(a.Data[i] - b.Data[i])
		se += d * d
	}
	return 10 * math.Log10(4/(se/float64(len(a.Data))))
}

func TestWithTilingRefusesBadTiles(t *testing.T) {
	m := &Model{cfg: Config{BlockOutChannels: []int{32, 32, 32, 32}}} // factor 8
	for _, tt := range []Tiling{{Sample: -8}, {Sample: 12}, {Sample: 32, Overlap: 1}, {Sample: 8, Overlap: 0.5}, {Sample: 48, Overlap: 0.25}} {
		if _, err := m.WithTiling(tt); !errors.Is(err, ErrInput) {
			t.Errorf("%+v: %v", tt, err)
		}
	}
	for _, tt := range []Tiling{{}, {Sample: 32, Overlap: 0.25}, {Sample: 768, Overlap: 0.25}} {
		if _, err := m.WithTiling(tt); err != nil {
			t.Errorf("%+v: %v", tt, err)
		}
	}
}
