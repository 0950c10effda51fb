package vae

import (
	"os"
	"testing"
)

// BenchmarkVAEDecodeDev times vae.decode of the dev checkpoint's vae_decode case (all frames
// at once); the graph is compiled before the timer starts.
func BenchmarkVAEDecodeDev(b *testing.B) {
	m, err := Load(openGolden(b), "", backend(b))
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	in, _ := goldenCase(b, "vae_decode")
	benchDecode(b, m, in["latents"].Shape, in["latents"].Data)
}

// BenchmarkVAEDecodeSmall times decoding 14 latent frames [14, 4, 8, 8] to 64x64 with the
// small random VAE of docs/measurements/cpu-plain-simplego-2026-11-22.md
// (block_out_channels [32, 64, 128, 128], two layers per block). About 20 GFLOP: tens of
// seconds on simplego, so it runs only when VDPP_BENCH_MID=1.
func BenchmarkVAEDecodeSmall(b *testing.B) {
	if os.Getenv("VDPP_BENCH_MID") != "1" {
		b.Skip("set VDPP_BENCH_MID=1 to run")
	}
	cfg := Config{InChannels: 3, OutChannels: 3, LatentChannels: 4, LayersPerBlock: 2, SampleSize: 64,
		BlockOutChannels: []int{32, 64, 128, 128}, ScalingFactor: 0.18215}
	for range cfg.BlockOutChannels {
		cfg.DownBlockTypes = append(cfg.DownBlockTypes, DownEncoderBlock2D)
	}
	shapes, err := ExpectedTensors(cfg)
	if err != nil {
		b.Fatal(err)
	}
	m, err := New(cfg, randomWeights(shapes, 4), backend(b))
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	z := randomTensor(9, 14, 4, 8, 8)
	benchDecode(b, m, z.Shape, z.Data)
}

// benchDecode compiles, then times Decode of one [F, latent, h, w] tensor.
func benchDecode(b *testing.B, m *Model, shape []int, data []float32) {
	z := randomTensor(0, shape...)
	copy(z.Data, data)
	if _, err := m.Decode(z, 0); err != nil { // compile
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if _, err := m.Decode(z, 0); err != nil {
			b.Fatal(err)
		}
	}
}
