package wantest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/vdpp/vdpp/model/clip"
	"github.com/vdpp/vdpp/model/wan/transformer"
	"github.com/vdpp/vdpp/safetensors"
	"github.com/vdpp/vdpp/tensor"
)

// I2V variants WriteI2VFolder writes.
const (
	Wan21I2V   = "wan21-i2v"      // CLIP image encoder, image branch
	Wan21FLF2V = "wan21-flf2v"    // the same with pos_embed_seq_len (first and last image)
	Wan22A14B  = "wan22-i2v-a14b" // two experts, no image encoder
	Wan22TI2V  = "wan22-ti2v"     // expand_timesteps, the residual patch-2 VAE
)

// I2VSpec are the sizes of a random image-to-video folder (zero fields: small defaults).
type I2VSpec struct {
	Variant                      string
	Heads, HeadDim, Layers       int
	TextDim, FFN                 int
	ZDim                         int
	CLIPHidden, CLIPHeads        int
	CLIPLayers, CLIPImage        int
	CLIPPatch                    int
	BoundaryRatio, FlowShift     float64
	Seed                         uint64
	VAEBaseDim, VAEResBlocks     int
	CLIPIntermediate, FreqDim    int
	DecoderBaseDim               int
	ProcessorShortest, CropPixel int
}

func (s *I2VSpec) defaults() {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&s.Heads, 2)
	def(&s.HeadDim, 12)
	def(&s.Layers, 2)
	def(&s.TextDim, 16)
	def(&s.FFN, 32)
	def(&s.ZDim, 4)
	def(&s.CLIPHidden, 24)
	def(&s.CLIPHeads, 2)
	def(&s.CLIPLayers, 3)
	def(&s.CLIPImage, 28)
	def(&s.CLIPPatch, 14)
	def(&s.VAEBaseDim, 4)
	def(&s.VAEResBlocks, 1)
	def(&s.CLIPIntermediate, 2*s.CLIPHidden)
	def(&s.FreqDim, 16)
	def(&s.ProcessorShortest, s.CLIPImage)
	def(&s.CropPixel, s.CLIPImage)
	if s.FlowShift == 0 {
		s.FlowShift = 3
	}
	if s.BoundaryRatio == 0 {
		s.BoundaryRatio = 0.9
	}
}

// WriteI2VFolder writes a diffusers Wan image-to-video folder of spec's variant and sizes
// with random weights (0.05·N(0, 1), norm weights 1 + 0.05·N(0, 1)) into dir: model_index.json,
// transformer/ (and transformer_2/), vae/, scheduler/ and, for Wan 2.1, image_encoder/
// (the whole CLIPVisionModel state dict) and image_processor/.
func WriteI2VFolder(dir string, s I2VSpec) error {
	s.defaults()
	r := rand.New(rand.NewPCG(s.Seed, 77))
	clipTokens := (s.CLIPImage/s.CLIPPatch)*(s.CLIPImage/s.CLIPPatch) + 1
	tf := 4
	tr := map[string]any{"_class_name": "WanTransformer3DModel", "patch_size": []int{1, 2, 2},
		"num_attention_heads": s.Heads, "attention_head_dim": s.HeadDim, "in_channels": 2*s.ZDim + tf,
		"out_channels": s.ZDim, "text_dim": s.TextDim, "freq_dim": s.FreqDim, "ffn_dim": s.FFN, "num_layers": s.Layers,
		"cross_attn_norm": true, "qk_norm": "rms_norm_across_heads", "eps": 1e-6, "image_dim": nil,
		"added_kv_proj_dim": nil, "rope_max_seq_len": 1024, "pos_embed_seq_len": nil}
	index := map[string]any{"_class_name": "WanImageToVideoPipeline", "boundary_ratio": nil, "expand_timesteps": false,
		"scheduler": []string{"diffusers", "UniPCMultistepScheduler"}, "text_encoder": []any{nil, nil},
		"tokenizer": []any{nil, nil}, "transformer": []string{"diffusers", "WanTransformer3DModel"},
		"transformer_2": []any{nil, nil}, "vae": []string{"diffusers", "AutoencoderKLWan"},
		"image_encoder": []any{nil, nil}, "image_processor": []any{nil, nil}}
	mean, std := make([]float64, s.ZDim), make([]float64, s.ZDim)
	for i := range mean {
		mean[i], std[i] = 0.1*float64(i%3)-0.1, 1.5+0.25*float64(i)
	}
	vc := map[string]any{"_class_name": "AutoencoderKLWan", "base_dim": s.VAEBaseDim, "z_dim": s.ZDim,
		"dim_mult": []int{1, 2, 2, 2}, "num_res_blocks": s.VAEResBlocks, "attn_scales": []int{},
		"temperal_downsample": []bool{false, true, true}, "dropout": 0.0, "latents_mean": mean, "latents_std": std}
	experts := 1
	switch s.Variant {
	case Wan21I2V, Wan21FLF2V:
		tr["image_dim"], tr["added_kv_proj_dim"] = s.CLIPHidden, s.Heads*s.HeadDim
		if s.Variant == Wan21FLF2V {
			tr["pos_embed_seq_len"] = 2 * clipTokens
		}
		index["image_encoder"] = []string{"transformers", "CLIPVisionModel"}
		index["image_processor"] = []string{"transformers", "CLIPImageProcessor"}
	case Wan22A14B:
		experts = 2
		index["boundary_ratio"] = s.BoundaryRatio
		index["transformer_2"] = []string{"diffusers", "WanTransformer3DModel"}
	case Wan22TI2V:
		tr["in_channels"] = s.ZDim
		index["_class_name"] = "WanPipeline"
		index["expand_timesteps"] = true
		delete(index, "image_encoder")
		delete(index, "image_processor")
		def := s.DecoderBaseDim
		if def == 0 {
			def = s.VAEBaseDim + 2
		}
		vc["decoder_base_dim"], vc["is_residual"], vc["in_channels"], vc["out_channels"] = def, true, 12, 12
		vc["patch_size"], vc["scale_factor_spatial"] = 2, 16
	default:
		return fmt.Errorf("wantest: unknown variant %q", s.Variant)
	}
	if err := writeJSON(filepath.Join(dir, "model_index.json"), index); err != nil {
		return err
	}
	for e := range experts {
		name := []string{"transformer", "transformer_2"}[e]
		tdir := filepath.Join(dir, name)
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
		if err := writeRandom(filepath.Join(tdir, "diffusion_pytorch_model.safetensors"), shapes, r); err != nil {
			return err
		}
	}
	if err := writeVAEAndScheduler(dir, vc, s.FlowShift, r); err != nil {
		return err
	}
	if s.Variant != Wan21I2V && s.Variant != Wan21FLF2V {
		return nil
	}
	cc := map[string]any{"architectures": []string{"CLIPVisionModel"}, "model_type": "clip_vision_model",
		"hidden_size": s.CLIPHidden, "intermediate_size": s.CLIPIntermediate, "projection_dim": 16,
		"num_hidden_layers": s.CLIPLayers, "num_attention_heads": s.CLIPHeads, "num_channels": 3,
		"image_size": s.CLIPImage, "patch_size": s.CLIPPatch, "hidden_act": "gelu", "layer_norm_eps": 1e-5}
	edir := filepath.Join(dir, "image_encoder")
	if err := writeJSON(filepath.Join(edir, "config.json"), cc); err != nil {
		return err
	}
	data, err := os.ReadFile(filepath.Join(edir, "config.json"))
	if err != nil {
		return err
	}
	ccfg, err := clip.ParseConfig(filepath.Join(edir, "config.json"), data)
	if err != nil {
		return err
	}
	cshapes, err := clip.HiddenTensors(ccfg, ccfg.NumHiddenLayers)
	if err != nil {
		return err
	}
	cshapes["vision_model.post_layernorm.weight"] = []int{s.CLIPHidden}
	cshapes["vision_model.post_layernorm.bias"] = []int{s.CLIPHidden}
	if err := writeRandom(filepath.Join(edir, "model.safetensors"), cshapes, r); err != nil {
		return err
	}
	proc := map[string]any{"image_processor_type": "CLIPImageProcessor", "do_resize": true,
		"size": map[string]int{"shortest_edge": s.ProcessorShortest}, "resample": 3, "do_center_crop": true,
		"crop_size": map[string]int{"height": s.CropPixel, "width": s.CropPixel}, "do_rescale": true,
		"rescale_factor": 1.0 / 255, "do_normalize": true, "do_convert_rgb": true,
		"image_mean": []float64{0.48145466, 0.4578275, 0.40821073}, "image_std": []float64{0.26862954, 0.26130258, 0.27577711}}
	return writeJSON(filepath.Join(dir, "image_processor", "preprocessor_config.json"), proc)
}

func writeJSON(path string, v any) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// writeRandom writes random float32 tensors of shapes to path.
func writeRandom(path string, shapes map[string][]int, r *rand.Rand) error {
	names := make([]string, 0, len(shapes))
	for n := range shapes {
		names = append(names, n)
	}
	slices.Sort(names)
	var out []safetensors.NamedTensor
	for _, n := range names {
		t := tensor.New(shapes[n]...)
		norm := strings.Contains(n, "norm") && strings.HasSuffix(n, "weight")
		for i := range t.Data {
			v := 0.05 * float32(r.NormFloat64())
			if norm {
				v++
			}
			t.Data[i] = v
		}
		out = append(out, safetensors.NamedTensor{Name: n, Tensor: t})
	}
	return safetensors.WriteFile(path, out, nil)
}
