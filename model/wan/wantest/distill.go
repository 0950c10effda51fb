package wantest

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/vdpp/vdpp/model/wan/transformer"
	"github.com/vdpp/vdpp/model/wan/vae"
)

// T2VSpec are the sizes of a random Wan text-to-video folder (WriteT2VFolder).
type T2VSpec struct {
	Heads, HeadDim, Layers, FFN int
	TextDim, FreqDim, ZDim      int
	// VAEBaseDim is the VAE's base width (a small VAE keeps the folder light: the
	// transformer is what a size is about).
	VAEBaseDim int
	FlowShift  float64
	Seed       uint64
}

// Wan13B is Wan2.1-T2V-1.3B's transformer (12 heads of 128, 30 blocks, feed-forward 8960,
// umT5's 4096-wide text, z_dim 16) with a small VAE and the folder's flow shift 3.
var Wan13B = T2VSpec{Heads: 12, HeadDim: 128, Layers: 30, FFN: 8960, TextDim: 4096, FreqDim: 256, ZDim: 16, VAEBaseDim: 8, FlowShift: 3}

// WriteT2VFolder writes a diffusers WanPipeline folder (one expert) of spec's sizes with
// random BF16 weights (0.05·N(0, 1), norm weights 1 + 0.05·N(0, 1)) into dir: model_index.json,
// transformer/, vae/ and scheduler/, no text encoder (generate takes --prompt-embeds). The
// weights are written one tensor at a time, so a 1.3B-shaped folder never exists in memory.
func WriteT2VFolder(dir string, s T2VSpec) error {
	r := rand.New(rand.NewPCG(s.Seed, 78))
	index := map[string]any{"_class_name": "WanPipeline", "boundary_ratio": nil, "expand_timesteps": false,
		"scheduler": []string{"diffusers", "UniPCMultistepScheduler"}, "text_encoder": []any{nil, nil},
		"tokenizer": []any{nil, nil}, "transformer": []string{"diffusers", "WanTransformer3DModel"},
		"transformer_2": []any{nil, nil}, "vae": []string{"diffusers", "AutoencoderKLWan"}}
	if err := writeJSON(filepath.Join(dir, "model_index.json"), index); err != nil {
		return err
	}
	tr := map[string]any{"_class_name": "WanTransformer3DModel", "patch_size": []int{1, 2, 2},
		"num_attention_heads": s.Heads, "attention_head_dim": s.HeadDim, "in_channels": s.ZDim,
		"out_channels": s.ZDim, "text_dim": s.TextDim, "freq_dim": s.FreqDim, "ffn_dim": s.FFN, "num_layers": s.Layers,
		"cross_attn_norm": true, "qk_norm": "rms_norm_across_heads", "eps": 1e-6, "image_dim": nil,
		"added_kv_proj_dim": nil, "rope_max_seq_len": 1024, "pos_embed_seq_len": nil}
	tdir := filepath.Join(dir, "transformer")
	if err := writeJSON(filepath.Join(tdir, "config.json"), tr); err != nil {
		return err
	}
	cfg, err := transformer.ReadConfig(tdir)
	if err != nil {
		return err
	}
	shapes, err := transformer.ExpectedTensors(cfg)
	if err != nil {
		return err
	}
	random := func(name string, i int) float32 {
		v := 0.05 * float32(r.NormFloat64())
		if strings.Contains(name, "norm") && strings.HasSuffix(name, "weight") {
			v++
		}
		return v
	}
	if err := writeBF16(filepath.Join(tdir, "diffusion_pytorch_model.safetensors"), shapes, random); err != nil {
		return err
	}
	mean, std := make([]float64, s.ZDim), make([]float64, s.ZDim)
	for i := range mean {
		mean[i], std[i] = 0.1*float64(i%3)-0.1, 1.5+0.25*float64(i%4)
	}
	vc := map[string]any{"_class_name": "AutoencoderKLWan", "base_dim": s.VAEBaseDim, "z_dim": s.ZDim,
		"dim_mult": []int{1, 2, 2, 2}, "num_res_blocks": 1, "attn_scales": []int{},
		"temperal_downsample": []bool{false, true, true}, "dropout": 0.0, "latents_mean": mean, "latents_std": std}
	return writeVAEAndScheduler(dir, vc, s.FlowShift, r)
}

// writeVAEAndScheduler writes dir's vae/ (config vc, random weights of its shapes from r)
// and scheduler/ (UniPC with flow shift shift, as the Wan releases configure it).
func writeVAEAndScheduler(dir string, vc map[string]any, shift float64, r *rand.Rand) error {
	vdir := filepath.Join(dir, "vae")
	if err := writeJSON(filepath.Join(vdir, "config.json"), vc); err != nil {
		return err
	}
	data, err := os.ReadFile(filepath.Join(vdir, "config.json"))
	if err != nil {
		return err
	}
	vcfg, err := vae.ParseConfig(filepath.Join(vdir, "config.json"), data)
	if err != nil {
		return err
	}
	vshapes, err := vae.ExpectedTensors(vcfg)
	if err != nil {
		return err
	}
	if err := writeRandom(filepath.Join(vdir, "diffusion_pytorch_model.safetensors"), vshapes, r); err != nil {
		return err
	}
	sched := map[string]any{"_class_name": "UniPCMultistepScheduler", "num_train_timesteps": 1000, "solver_order": 2,
		"prediction_type": "flow_prediction", "use_flow_sigmas": true, "flow_shift": shift, "solver_type": "bh2",
		"lower_order_final": true, "predict_x0": true, "timestep_spacing": "linspace", "final_sigmas_type": "zero",
		"beta_start": 0.0001, "beta_end": 0.02, "beta_schedule": "linear"}
	return writeJSON(filepath.Join(dir, "scheduler", "scheduler_config.json"), sched)
}

// distillLinears are the original names of a Wan block's linear layers a step-distillation
// LoRA changes, with the diffusers names that give their shapes.
var distillLinears = [][2]string{
	{"self_attn.q", "attn1.to_q"}, {"self_attn.k", "attn1.to_k"}, {"self_attn.v", "attn1.to_v"}, {"self_attn.o", "attn1.to_out.0"},
	{"cross_attn.q", "attn2.to_q"}, {"cross_attn.k", "attn2.to_k"}, {"cross_attn.v", "attn2.to_v"}, {"cross_attn.o", "attn2.to_out.0"},
	{"ffn.0", "ffn.net.0.proj"}, {"ffn.2", "ffn.net.2"},
}

// DistillLoRAShapes are the tensors of a step- and CFG-distilled LoRA in the original Wan
// layout of the lightx2v releases (as lightx2v's LoRA loader and ComfyUI's key listings show
// them), for a transformer of cfg and rank: every block's linear layers as lora_down
// [rank, in] and lora_up [out, rank] with their bias changes (diff_b), the norms' diff (and
// the cross-attention norm's diff_b), the block's modulation change (diff_m), and the head,
// text and time embedding and time projection factors with diff_b. No alpha: the scale is 1.
func DistillLoRAShapes(cfg transformer.Config, rank int) (map[string][]int, error) {
	exp, err := transformer.ExpectedTensors(cfg)
	if err != nil {
		return nil, err
	}
	out := map[string][]int{}
	factor := func(orig, net string) error {
		w, ok := exp[net+".weight"]
		if !ok || len(w) != 2 {
			return fmt.Errorf("wantest: %s.weight is %v", net, w)
		}
		k := "diffusion_model." + orig
		out[k+".lora_down.weight"], out[k+".lora_up.weight"], out[k+".diff_b"] = []int{rank, w[1]}, []int{w[0], rank}, []int{w[0]}
		return nil
	}
	dim := cfg.InnerDim()
	for i := range cfg.NumLayers {
		b := fmt.Sprintf("blocks.%d.", i)
		for _, l := range distillLinears {
			if err := factor(b+l[0], b+l[1]); err != nil {
				return nil, err
			}
		}
		k := "diffusion_model." + b
		out[k+"norm3.diff"], out[k+"norm3.diff_b"] = []int{dim}, []int{dim}
		for _, n := range []string{"self_attn.norm_q", "self_attn.norm_k", "cross_attn.norm_q", "cross_attn.norm_k"} {
			out[k+n+".diff"] = []int{dim}
		}
		out["diffusion_model.blocks."+fmt.Sprint(i)+".diff_m"] = exp[b+"scale_shift_table"]
	}
	for _, l := range [][2]string{{"head.head", "proj_out"}, {"text_embedding.0", "condition_embedder.text_embedder.linear_1"},
		{"text_embedding.2", "condition_embedder.text_embedder.linear_2"}, {"time_embedding.0", "condition_embedder.time_embedder.linear_1"},
		{"time_embedding.2", "condition_embedder.time_embedder.linear_2"}, {"time_projection.1", "condition_embedder.time_proj"}} {
		if err := factor(l[0], l[1]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// WriteDistillLoRA writes a random LoRA of DistillLoRAShapes in BF16, as the releases are
// stored: down factors N(0, 1/in), up factors 0.01·N(0, 1), bias and modulation changes
// 0.01·N(0, 1), the norms' changes zero (as released files hold them). It streams, so a
// 14B-shaped one never exists in memory.
func WriteDistillLoRA(path string, cfg transformer.Config, rank int, seed uint64) error {
	shapes, err := DistillLoRAShapes(cfg, rank)
	if err != nil {
		return err
	}
	r := rand.New(rand.NewPCG(seed, 79))
	return writeBF16(path, shapes, func(name string, i int) float32 {
		switch {
		case strings.Contains(name, "norm"):
			return 0
		case strings.HasSuffix(name, ".lora_down.weight"):
			return float32(r.NormFloat64() / math.Sqrt(float64(shapes[name][1])))
		}
		return 0.01 * float32(r.NormFloat64())
	})
}

// writeBF16 streams a BF16 safetensors file: each tensor's values come from value(name,
// index), in the file's (sorted) order.
func writeBF16(path string, shapes map[string][]int, value func(name string, i int) float32) error {
	names := make([]string, 0, len(shapes))
	for n := range shapes {
		names = append(names, n)
	}
	slices.Sort(names)
	header := map[string]any{}
	var off int64
	for _, n := range names {
		size := int64(2)
		for _, d := range shapes[n] {
			size *= int64(d)
		}
		header[n] = map[string]any{"dtype": "BF16", "shape": shapes[n], "data_offsets": []int64{off, off + size}}
		off += size
	}
	h, err := json.Marshal(header)
	if err != nil {
		return err
	}
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	binary.Write(w, binary.LittleEndian, uint64(len(h)))
	w.Write(h)
	var b [2]byte
	for _, n := range names {
		count := 1
		for _, d := range shapes[n] {
			count *= d
		}
		for i := range count {
			u := math.Float32bits(value(n, i))
			u += 0x7fff + (u>>16)&1 // round to nearest even
			binary.LittleEndian.PutUint16(b[:], uint16(u>>16))
			w.Write(b[:])
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
