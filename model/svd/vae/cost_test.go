package vae

import "testing"

// builtinVAE is builtin/model/vae/config.json, the built-in SVD's VAE the calibration
// points were measured on.
var builtinVAE = Config{InChannels: 3, OutChannels: 3, BlockOutChannels: []int{32, 32, 32, 32}, LayersPerBlock: 1,
	LatentChannels: 4, SampleSize: 64, ScalingFactor: 0.5949857005597851}

// TestDecodeBytesCalibration checks DecodeBytes against the peak resident growth measured
// with scripts/svdmem -stage decode on the built-in model (the largest of the runs
// recorded in docs/measurements/serve-i2v-memory-2026-12-07.md, 2 cores, so 2 decode calls
// at once): the estimate is at least what was measured, and within 3x of it.
func TestDecodeBytesCalibration(t *testing.T) {
	const mib = 1 << 20
	goFused := DecodeShape{Parallel: 2, Fused: true, GoHeap: true}
	goPlain := DecodeShape{Parallel: 2, Im2Col: true, GoHeap: true}
	with := func(s DecodeShape, w, h, frames, chunk, tile int) DecodeShape {
		s.Width, s.Height, s.Frames, s.Chunk, s.Tile = w, h, frames, chunk, tile
		return s
	}
	for _, c := range []struct {
		name     string
		shape    DecodeShape
		measured int64 // MiB
	}{
		{"256x256, 14 frames, chunks of 7", with(goFused, 256, 256, 14, 7, 0), 1477},
		{"128x128, 14 frames, chunks of 7", with(goFused, 128, 128, 14, 7, 0), 327},
		{"256x256, 7 frames, chunks of 7", with(goFused, 256, 256, 7, 7, 0), 779},
		{"256x256, 14 frames, one call", with(goFused, 256, 256, 14, 0, 0), 1460},
		{"256x256, 14 frames, chunks of 7, tiles of 128", with(goFused, 256, 256, 14, 7, 128), 444},
		{"128x128, 7 frames, fused ops off", with(goPlain, 128, 128, 7, 7, 0), 831},
	} {
		got := builtinVAE.DecodeBytes(c.shape)
		if got < c.measured*mib || got > 3*c.measured*mib {
			t.Errorf("%s: estimate %d MiB, measured %d MiB", c.name, got/mib, c.measured)
		}
	}
}

// TestDecodeBytes checks how the estimate follows the decode: calls at once cost each
// their working set, smaller chunks less, tiles less than the whole frame, whole im2col
// patches and attention scores more, the Go heap twice; nothing to decode is 0.
func TestDecodeBytes(t *testing.T) {
	svdVAE := Config{InChannels: 3, OutChannels: 3, BlockOutChannels: []int{128, 256, 512, 512}, LayersPerBlock: 2, LatentChannels: 4}
	base := DecodeShape{Frames: 14, Height: 576, Width: 1024, Chunk: 7, Parallel: 1, Fused: true}
	at := func(f func(*DecodeShape)) int64 {
		s := base
		f(&s)
		return svdVAE.DecodeBytes(s)
	}
	one := svdVAE.DecodeBytes(base)
	for _, c := range []struct {
		name string
		cmp  func(got int64) bool
		set  func(*DecodeShape)
	}{
		{"two calls at once", func(g int64) bool { return g > 3*one/2 }, func(s *DecodeShape) { s.Parallel = 2 }},
		{"more calls at once than chunks", func(g int64) bool { return g == at(func(s *DecodeShape) { s.Parallel = 2 }) }, func(s *DecodeShape) { s.Parallel = 8 }},
		{"one call of 14 frames", func(g int64) bool { return g > 3*one/2 }, func(s *DecodeShape) { s.Chunk = 0 }},
		{"chunks of 2", func(g int64) bool { return g < one/2 }, func(s *DecodeShape) { s.Chunk = 2 }},
		{"tiles of 256", func(g int64) bool { return g < one/2 }, func(s *DecodeShape) { s.Tile = 256 }},
		{"a tile larger than the frame", func(g int64) bool { return g == one }, func(s *DecodeShape) { s.Tile = 2048 }},
		{"im2col", func(g int64) bool { return g > 2*one }, func(s *DecodeShape) { s.Fused, s.Im2Col = false, true }},
		{"whole attention scores", func(g int64) bool { return g >= one }, func(s *DecodeShape) { s.Fused = false }},
		{"Go heap", func(g int64) bool { return g == 2*one }, func(s *DecodeShape) { s.GoHeap = true }},
		{"no frames", func(g int64) bool { return g == 0 }, func(s *DecodeShape) { s.Frames = 0 }},
	} {
		if got := at(c.set); !c.cmp(got) {
			t.Errorf("%s: %d B, against %d B for chunks of 7 one at a time", c.name, got, one)
		}
	}
	if got := (Config{}).DecodeBytes(base); got != 0 {
		t.Errorf("no blocks: %d B", got)
	}
}
