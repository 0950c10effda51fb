// Command wanmoe writes a two-expert Wan 2.2 text-to-video folder with random weights, in
// the diffusers layout, for measuring experts per stage (scripts/wan-experts.sh): two
// WanTransformer3DModel experts of the size the flags give (the defaults make each about
// 320 MB in float32), the VAE and scheduler copied from a reference folder (the dev one by
// default), and model_index.json with boundary_ratio. Weights are 0.02·N(0,1) from a fixed
// seed; nothing is trained. -dtype BF16 stores the experts in bfloat16, as Wan 2.2's released
// folders do (scripts/load-rss.sh measures what loading them costs).
package main

import (
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"

	"github.com/vdpp/vdpp/model/wan/transformer"
	"github.com/vdpp/vdpp/safetensors"
	"github.com/vdpp/vdpp/tensor"
)

func main() {
	out := flag.String("out", "", "folder to write")
	ref := flag.String("ref", "../shared/golden/wan-dev", "Wan folder whose vae/ and scheduler/ are copied (its z_dim sets the channels)")
	heads := flag.Int("heads", 12, "attention heads")
	headDim := flag.Int("head-dim", 64, "head dim")
	layers := flag.Int("layers", 8, "transformer blocks")
	ffn := flag.Int("ffn", 3072, "feed-forward dim")
	textDim := flag.Int("text-dim", 1024, "prompt embedding width")
	boundary := flag.Float64("boundary-ratio", 0.875, "boundary_ratio")
	dtype := flag.String("dtype", "F32", "stored dtype of the transformers' weights: F32, BF16 or F16 (the file name stays the default one, as Wan 2.2's bf16 folders have it)")
	flag.Parse()
	if *out == "" {
		log.Fatal("wanmoe: -out DIR is required")
	}
	var vaeCfg struct {
		ZDim int `json:"z_dim"`
	}
	if err := readJSON(filepath.Join(*ref, "vae", "config.json"), &vaeCfg); err != nil {
		log.Fatal(err)
	}
	cfg := map[string]any{
		"_class_name": "WanTransformer3DModel", "_diffusers_version": "0.35.2",
		"added_kv_proj_dim": nil, "attention_head_dim": *headDim, "cross_attn_norm": true, "eps": 1e-6,
		"ffn_dim": *ffn, "freq_dim": 256, "image_dim": nil, "in_channels": vaeCfg.ZDim, "num_attention_heads": *heads,
		"num_layers": *layers, "out_channels": vaeCfg.ZDim, "patch_size": []int{1, 2, 2}, "pos_embed_seq_len": nil,
		"qk_norm": "rms_norm_across_heads", "rope_max_seq_len": 1024, "text_dim": *textDim,
	}
	for i, name := range []string{"transformer", "transformer_2"} {
		if err := writeExpert(filepath.Join(*out, name), cfg, uint64(i+1), safetensors.DType(*dtype)); err != nil {
			log.Fatal(err)
		}
	}
	for _, c := range []string{"vae", "scheduler"} {
		if err := copyDir(filepath.Join(*ref, c), filepath.Join(*out, c)); err != nil {
			log.Fatal(err)
		}
	}
	index := map[string]any{
		"_class_name": "WanPipeline", "_diffusers_version": "0.35.2", "boundary_ratio": *boundary, "expand_timesteps": false,
		"scheduler": []string{"diffusers", "UniPCMultistepScheduler"}, "text_encoder": []any{nil, nil}, "tokenizer": []any{nil, nil},
		"transformer": []string{"diffusers", "WanTransformer3DModel"}, "transformer_2": []string{"diffusers", "WanTransformer3DModel"},
		"vae": []string{"diffusers", "AutoencoderKLWan"},
	}
	if err := writeJSON(filepath.Join(*out, "model_index.json"), index); err != nil {
		log.Fatal(err)
	}
}

// writeExpert writes dir/config.json and random weights for every tensor the config needs,
// stored as dtype.
func writeExpert(dir string, cfg map[string]any, seed uint64, dtype safetensors.DType) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	path := filepath.Join(dir, transformer.ConfigFile)
	if err := writeJSON(path, cfg); err != nil {
		return err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	c, err := transformer.ParseConfig(path, data)
	if err != nil {
		return err
	}
	exp, err := transformer.ExpectedTensors(c)
	if err != nil {
		return err
	}
	r := rand.New(rand.NewPCG(seed, 0x3a17))
	var ts []safetensors.RawTensor
	var n, size int
	for _, name := range slices.Sorted(maps.Keys(exp)) {
		t := tensor.New(exp[name]...)
		for i := range t.Data {
			t.Data[i] = 0.02 * float32(r.NormFloat64())
		}
		b, err := encode(t.Data, dtype)
		if err != nil {
			return err
		}
		n, size = n+t.Len(), size+len(b)
		ts = append(ts, safetensors.RawTensor{Name: name, DType: dtype, Shape: t.Shape, Data: b})
	}
	fmt.Printf("%s: %d tensors, %.1f M parameters, %.0f MB (%s)\n", dir, len(ts), float64(n)/1e6, float64(size)/1e6, dtype)
	return safetensors.WriteRawFile(filepath.Join(dir, transformer.WeightsStem+".safetensors"), ts, map[string]string{"format": "pt"})
}

// encode stores float32 values as little-endian dtype elements (rounded to nearest even).
func encode(v []float32, dtype safetensors.DType) ([]byte, error) {
	switch dtype {
	case safetensors.F32:
		b := make([]byte, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
		}
		return b, nil
	case safetensors.BF16, safetensors.F16:
		b := make([]byte, 2*len(v))
		for i, x := range v {
			h := safetensors.Float32ToBFloat16(x)
			if dtype == safetensors.F16 {
				h = safetensors.Float32ToHalf(x)
			}
			binary.LittleEndian.PutUint16(b[2*i:], h)
		}
		return b, nil
	}
	return nil, fmt.Errorf("wanmoe: -dtype %q: want F32, BF16 or F16", dtype)
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func copyDir(src, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		in, err := os.Open(filepath.Join(src, e.Name()))
		if err != nil {
			return err
		}
		out, err := os.Create(filepath.Join(dst, e.Name()))
		if err == nil {
			_, err = io.Copy(out, in)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
		}
		in.Close()
		if err != nil {
			return err
		}
	}
	return nil
}
