package unet

import (
	"os"
	"testing"

	"github.com/vdpp/vdpp/tensor"
)

// BenchmarkUNetDev times one UNet call on the dev checkpoint's unet_forward case
// ([2, 3, 8, 16, 16]); the graph is compiled before the timer starts.
func BenchmarkUNetDev(b *testing.B) {
	in := readCase(b, devCheckpoint(b), "unet_forward", "inputs")
	benchForward(b, devModel(b, ""), in["sample"], in["timestep"], in["encoder_hidden_states"], in["added_time_ids"])
}

// benchForward times m.Forward on the given inputs; the graph is compiled before the timer
// starts.
func benchForward(b *testing.B, m *Model, sample, ts, ehs, ids *tensor.Dense) {
	run := func() {
		if _, err := m.Forward(sample, ts, ehs, ids); err != nil {
			b.Fatal(err)
		}
	}
	run() // compile
	b.ResetTimer()
	for range b.N {
		run()
	}
}

// benchRandom times a random-weight UNet of the JSON config on batch rows of h x w latents.
func benchRandom(b *testing.B, config string, seed uint64, batch, h, w int) {
	cfg := parseConfig(b, config)
	m, err := New(cfg, randomWeights(b, cfg, seed), backend(b))
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	ids := tensor.New(batch, 3)
	for r := 0; r < batch; r++ {
		copy(ids.Data[3*r:], []float32{6, 127, 0.02})
	}
	benchForward(b, m, randomTensor(1, batch, cfg.NumFrames, cfg.InChannels, h, w),
		&tensor.Dense{Shape: []int{1}, Data: []float32{0.7}}, randomTensor(2, batch, 1, cfg.CrossAttentionDim[0]), ids)
}

// midConfig is a mid-size UNet: three levels of 64, 128, 256 channels, 64-wide heads.
const midConfig = `{
  "addition_time_embed_dim": 64, "projection_class_embeddings_input_dim": 192,
  "block_out_channels": [64, 128, 256], "cross_attention_dim": 256,
  "down_block_types": ["CrossAttnDownBlockSpatioTemporal", "CrossAttnDownBlockSpatioTemporal", "DownBlockSpatioTemporal"],
  "up_block_types": ["UpBlockSpatioTemporal", "CrossAttnUpBlockSpatioTemporal", "CrossAttnUpBlockSpatioTemporal"],
  "in_channels": 8, "out_channels": 4, "layers_per_block": 2,
  "num_attention_heads": [1, 2, 4], "num_frames": 14
}`

// BenchmarkUNetMid times one call of a mid-size random UNet on [1, 14, 8, 32, 32]. It
// takes minutes on simplego, so it runs only when VDPP_BENCH_MID=1.
func BenchmarkUNetMid(b *testing.B) {
	if os.Getenv("VDPP_BENCH_MID") != "1" {
		b.Skip("set VDPP_BENCH_MID=1 to run")
	}
	benchRandom(b, midConfig, 3, 1, 32, 32)
}

// smallBenchConfig is the "small model" of docs/measurements/cpu-plain-simplego-2026-11-22.md:
// three levels of 32, 64, 128 channels, heads of 32, 64 and 64 features.
const smallBenchConfig = `{
  "addition_time_embed_dim": 32, "projection_class_embeddings_input_dim": 96,
  "block_out_channels": [32, 64, 128], "cross_attention_dim": 128,
  "down_block_types": ["CrossAttnDownBlockSpatioTemporal", "CrossAttnDownBlockSpatioTemporal", "DownBlockSpatioTemporal"],
  "up_block_types": ["UpBlockSpatioTemporal", "CrossAttnUpBlockSpatioTemporal", "CrossAttnUpBlockSpatioTemporal"],
  "in_channels": 8, "out_channels": 4, "layers_per_block": 2,
  "num_attention_heads": [1, 1, 2], "num_frames": 14
}`

// BenchmarkUNetSmall times one call of the small random UNet on [2, 14, 8, 8, 8]: a
// 14-frame 64x64 video with classifier-free guidance (batch 2). A few seconds on simplego.
func BenchmarkUNetSmall(b *testing.B) {
	benchRandom(b, smallBenchConfig, 5, 2, 8, 8)
}
