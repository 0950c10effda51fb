package wantest

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/gguf"
	"github.com/vdpp/vdpp/internal/shared"
	"github.com/vdpp/vdpp/model/wan/transformer"
	"github.com/vdpp/vdpp/model/wan/vae"
	"github.com/vdpp/vdpp/safetensors"
	"github.com/vdpp/vdpp/tensor"
	"github.com/vdpp/vdpp/tensor/quant"
)

// A14BConfig is the transformer config of each Wan 2.2 A14B expert as released (width
// 5120 = 40 heads of 128, FFN 13824, text 4096, frequencies 256, 16 latent channels), with
// layers layers instead of 40.
func A14BConfig(layers int) map[string]any {
	return map[string]any{"_class_name": "WanTransformer3DModel", "attention_head_dim": 128, "cross_attn_norm": true,
		"eps": 1e-6, "ffn_dim": 13824, "freq_dim": 256, "in_channels": 16, "num_attention_heads": 40,
		"num_layers": layers, "out_channels": 16, "patch_size": []int{1, 2, 2}, "qk_norm": "rms_norm_across_heads",
		"rope_max_seq_len": 1024, "text_dim": 4096}
}

// WriteMoEFolder writes a Wan 2.2 text-to-video folder of two experts of transformer config
// cfg (configs only: their weights come as files, WriteRandomGGUF) with wan-dev's scheduler
// and a small random VAE of z_dim cfg's out_channels (base 8: what the tests decode), and
// It takes prompt embeddings (no text encoder).
func WriteMoEFolder(t testing.TB, dir string, cfg map[string]any, seed uint64) {
	t.Helper()
	dev := shared.Require(t, "golden", "wan-dev")
	writeJSON := func(path string, v any) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		b, _ := json.MarshalIndent(v, "", "  ")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeJSON(filepath.Join(dir, "model_index.json"), map[string]any{"_class_name": "WanPipeline", "boundary_ratio": 0.875,
		"expand_timesteps": false, "scheduler": []string{"diffusers", "UniPCMultistepScheduler"},
		"text_encoder": []any{nil, nil}, "tokenizer": []any{nil, nil},
		"transformer": []string{"diffusers", "WanTransformer3DModel"}, "transformer_2": []string{"diffusers", "WanTransformer3DModel"},
		"vae": []string{"diffusers", "AutoencoderKLWan"}})
	writeJSON(filepath.Join(dir, "transformer", "config.json"), cfg)
	writeJSON(filepath.Join(dir, "transformer_2", "config.json"), cfg)
	sc, err := os.ReadFile(filepath.Join(dev, "scheduler", "scheduler_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "scheduler"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "scheduler", "scheduler_config.json"), sc, 0o644); err != nil {
		t.Fatal(err)
	}
	z := cfg["out_channels"].(int)
	mean, std := make([]float64, z), make([]float64, z)
	for i := range mean {
		mean[i], std[i] = 0.1*float64(i%5)-0.2, 1+0.1*float64(i%3)
	}
	vcfg := map[string]any{"_class_name": "AutoencoderKLWan", "attn_scales": []int{}, "base_dim": 8, "dim_mult": []int{1, 2, 2, 2},
		"dropout": 0.0, "in_channels": 3, "out_channels": 3, "is_residual": false, "latents_mean": mean, "latents_std": std,
		"num_res_blocks": 1, "temperal_downsample": []bool{false, true, true}, "z_dim": z}
	writeJSON(filepath.Join(dir, "vae", "config.json"), vcfg)
	vdata, _ := os.ReadFile(filepath.Join(dir, "vae", "config.json"))
	vc, err := vae.ParseConfig(filepath.Join(dir, "vae", "config.json"), vdata)
	if err != nil {
		t.Fatal(err)
	}
	exp, err := vae.ExpectedTensors(vc)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 0xfae))
	ts := map[string]*tensor.Dense{}
	for _, n := range sortedNames(exp) {
		d := tensor.New(exp[n]...)
		for i := range d.Data {
			d.Data[i] = float32(0.1 * r.NormFloat64())
		}
		ts[n] = d
	}
	if err := safetensors.WriteMapFile(filepath.Join(dir, "vae", "diffusion_pytorch_model.safetensors"), ts, nil); err != nil {
		t.Fatal(err)
	}
}

func sortedNames(m map[string][]int) []string {
	out := make([]string, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// WriteRandomGGUF writes random weights for a transformer of config cfg as a GGUF in Wan's
// original layout, the weight matrices in q8_0 (random quants, a block scale drawn per
// block) and the rest in f32, one tensor in memory at a time; it is quick for the released
// widths, where drawing normal floats and quantizing them is not. It returns the file's
// size.
func WriteRandomGGUF(t testing.TB, cfg transformer.Config, path string, seed uint64) int64 {
	t.Helper()
	exp, err := transformer.ExpectedTensors(cfg)
	if err != nil {
		t.Fatal(err)
	}
	names := sortedNames(exp)
	sort.Slice(names, func(i, j int) bool {
		return transformer.OriginalKeys.ToFile(names[i]) < transformer.OriginalKeys.ToFile(names[j])
	})
	w := gguf.NewWriter()
	w.Set("general.architecture", gguf.String("wan"))
	for k, n := range names {
		shape := exp[n]
		r := rand.New(rand.NewPCG(seed, uint64(k)))
		typ := quant.F32
		if len(shape) >= 2 && strings.HasSuffix(n, ".weight") && quant.Q8_0.Fits(shape[len(shape)-1]) {
			typ = quant.Q8_0
		}
		// A matrix's scale keeps a layer's output near its input's size: 1/sqrt(fan-in).
		fan := 1
		if len(shape) >= 2 {
			fan = tensor.NumElements(shape[1:])
		}
		scale := float32(1 / math.Sqrt(float64(fan)))
		isNorm := strings.Contains(n, "norm")
		err := w.AddFunc(transformer.OriginalKeys.ToFile(n), typ, shape, func(dst []byte) error {
			if typ == quant.F32 {
				for i := 0; i < len(dst); i += 4 {
					v := scale * float32(r.NormFloat64())
					if isNorm {
						v = 1 + 0.1*v
					}
					binary.LittleEndian.PutUint32(dst[i:], math.Float32bits(v))
				}
				return nil
			}
			// r's stream, drawn from a copy of its source on the stack into blocks on the
			// stack, copied out a run at a time: under the race detector every load and store
			// of the heap is a checked call, and a file is 1 GB (the byte-at-a-time loop took
			// most of a minute).
			pcg := *rand.NewPCG(seed, uint64(k))
			var run [64 * 34]byte
			for b := 0; b < len(dst); b += len(run) {
				n := min(len(run), len(dst)-b)
				for o := 0; o < n; o += 34 {
					f := float64(pcg.Uint64()<<11>>11) / (1 << 53) // rand.Rand's Float64
					d := quant.Float32ToHalf(scale * 1.7 / 127 * float32(0.8+0.4*f))
					run[o], run[o+1] = byte(d), byte(d>>8)
					for q := o + 2; q < o+34; q += 8 {
						v := noMinus128(pcg.Uint64())
						for j := range 8 {
							run[q+j] = byte(v >> (8 * j))
						}
					}
				}
				copy(dst[b:b+n], run[:n])
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	// The writer's tensor buffers (tens of MB each, with the race detector's shadow of
	// them) go back to the system now, not at the scavenger's pace: a test that wrote two
	// experts otherwise held 1.5 GB instead of 0.56 GB for the rest of its package's run.
	debug.FreeOSMemory()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// noMinus128 replaces each byte 0x80 (-128: q8_0 quants are in [-127, 127]) of eight quants
// with 0x81, on the word: under the race detector a loop over the bytes of a 1 GB file
// costs a minute of instrumented loads and stores.
func noMinus128(v uint64) uint64 {
	const low7, ones = 0x7f7f7f7f7f7f7f7f, 0x0101010101010101
	x := v ^ 0x8080808080808080 // a byte that was 0x80 is now 0
	// The high bit of each byte of zero is exactly that of x's zero bytes (no borrow
	// crosses bytes: the sum of two 7-bit halves fits in the byte).
	zero := ^(((x & low7) + low7) | x | low7)
	return v | (zero>>7)&ones
}
