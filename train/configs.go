package train

import (
	"encoding/json"
	"fmt"

	"github.com/vdpp/vdpp/model/checkpoint"
	"github.com/vdpp/vdpp/model/clip"
	"github.com/vdpp/vdpp/model/svd/unet"
	"github.com/vdpp/vdpp/model/svd/vae"
)

// Configs are the component configs of the built-in model, as the JSON files of a
// diffusers folder, and the sampling defaults written beside them
// (checkpoint.SamplingFile; nil writes none).
type Configs struct {
	UNet, VAE, CLIP, Scheduler, Features, Index map[string]any
	Sampling                                    *checkpoint.Sampling
}

// recipeSampling is the sampling defaults of a model trained by the built-in model's
// recipe (docs/builtin-model.md): guidance 2 -> 4, measured with `vdpp eval` on the
// built-in model (builtin.MinGuidance, MaxGuidance; a test checks they agree), and the
// recipe's 7-frame decode chunk, which Export replaces by the clip length the run's VAE
// last trained on where its checkpoint records one.
var recipeSampling = checkpoint.Sampling{MinGuidance: 2, MaxGuidance: 4, DecodeChunkSize: 7}

// TinyConfigs returns the built-in model's configs: 64x64 RGB, 14 frames. They are sized for
// a 2-core CPU on GoMLX's pure-Go backend, where a UNet call's cost follows the latent's
// area and the number of ops (docs/builtin-model.md has the timings that chose them):
//
//   - VAE: 4 levels of 32 channels (downsampling factor 8, as SVD), one resnet per level,
//     4 latent channels: a 64x64 frame becomes an 8x8x4 latent. (A factor-16 VAE with
//     4x4x16 latents would make the UNet 4x cheaper, but it sat at the background-only
//     loss for hundreds of steps where this one learned.)
//   - UNet: 2 levels of 32 channels (8x8 and 4x4), one layer per block, the spatio-temporal
//     transformer in the mid block only (4x4 tokens, 14 frames), heads of 32 channels,
//     cross-attention width 64, 14 frames, in 8 / out 4; about 0.45 M parameters.
//   - Image encoder: a 2-layer ViT of width 64 on 32x32 pixels (patch 8), projection 64.
//
// Every channel count is a multiple of 32 because the architecture's GroupNorms use 32
// groups; layers_per_block is at least 1 because the temporal decoder's mid block always
// runs its first resnet.
func TinyConfigs() Configs {
	smp := recipeSampling
	return Configs{
		UNet: map[string]any{
			"_class_name":                           "UNetSpatioTemporalConditionModel",
			"_diffusers_version":                    "0.31.0",
			"addition_time_embed_dim":               32,
			"block_out_channels":                    []int{32, 32},
			"cross_attention_dim":                   64,
			"down_block_types":                      []string{"DownBlockSpatioTemporal", "DownBlockSpatioTemporal"},
			"up_block_types":                        []string{"UpBlockSpatioTemporal", "UpBlockSpatioTemporal"},
			"in_channels":                           8,
			"out_channels":                          4,
			"layers_per_block":                      1,
			"num_attention_heads":                   []int{1, 1},
			"num_frames":                            14,
			"projection_class_embeddings_input_dim": 96,
			"sample_size":                           8,
			"transformer_layers_per_block":          1,
		},
		VAE: map[string]any{
			"_class_name":        "AutoencoderKLTemporalDecoder",
			"_diffusers_version": "0.31.0",
			"block_out_channels": []int{32, 32, 32, 32},
			"down_block_types":   []string{"DownEncoderBlock2D", "DownEncoderBlock2D", "DownEncoderBlock2D", "DownEncoderBlock2D"},
			"force_upcast":       true,
			"in_channels":        3,
			"out_channels":       3,
			"latent_channels":    4,
			"layers_per_block":   1,
			"sample_size":        64,
			"scaling_factor":     1.0,
		},
		CLIP: map[string]any{
			"architectures":       []string{"CLIPVisionModelWithProjection"},
			"attention_dropout":   0.0,
			"dropout":             0.0,
			"hidden_act":          "gelu",
			"hidden_size":         64,
			"image_size":          32,
			"initializer_factor":  1.0,
			"initializer_range":   0.02,
			"intermediate_size":   128,
			"layer_norm_eps":      1e-05,
			"model_type":          "clip_vision_model",
			"num_attention_heads": 2,
			"num_channels":        3,
			"num_hidden_layers":   2,
			"patch_size":          8,
			"projection_dim":      64,
		},
		Scheduler: map[string]any{
			"_class_name":         "EulerDiscreteScheduler",
			"_diffusers_version":  "0.24.0.dev0",
			"beta_end":            0.012,
			"beta_schedule":       "scaled_linear",
			"beta_start":          0.00085,
			"clip_sample":         false,
			"interpolation_type":  "linear",
			"num_train_timesteps": 1000,
			"prediction_type":     "v_prediction",
			"set_alpha_to_one":    false,
			"sigma_max":           700.0,
			"sigma_min":           0.002,
			"skip_prk_steps":      true,
			"steps_offset":        1,
			"timestep_spacing":    "leading",
			"timestep_type":       "continuous",
			"trained_betas":       nil,
			"use_karras_sigmas":   true,
		},
		Features: map[string]any{
			"crop_size":              map[string]int{"height": 32, "width": 32},
			"do_center_crop":         true,
			"do_convert_rgb":         true,
			"do_normalize":           true,
			"do_rescale":             true,
			"do_resize":              true,
			"feature_extractor_type": "CLIPFeatureExtractor",
			"image_mean":             []float64{0.48145466, 0.4578275, 0.40821073},
			"image_processor_type":   "CLIPImageProcessor",
			"image_std":              []float64{0.26862954, 0.26130258, 0.27577711},
			"resample":               3,
			"rescale_factor":         0.00392156862745098,
			"size":                   map[string]int{"shortest_edge": 32},
		},
		Index: map[string]any{
			"_class_name":        "StableVideoDiffusionPipeline",
			"_diffusers_version": "0.31.0",
			"feature_extractor":  []string{"transformers", "CLIPImageProcessor"},
			"image_encoder":      []string{"transformers", "CLIPVisionModelWithProjection"},
			"scheduler":          []string{"diffusers", "EulerDiscreteScheduler"},
			"unet":               []string{"diffusers", "UNetSpatioTemporalConditionModel"},
			"vae":                []string{"diffusers", "AutoencoderKLTemporalDecoder"},
		},
		Sampling: &smp,
	}
}

// marshal encodes a config map as indented JSON.
func marshal(m map[string]any) ([]byte, error) {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("train: config: %w", err)
	}
	return append(b, '\n'), nil
}

// Parsed returns the typed configs of c through the checkpoint parsers (the ones svd.Load
// uses), so training builds exactly what loading will build.
func (c Configs) Parsed() (unet.Config, vae.Config, clip.Config, error) {
	var (
		u   unet.Config
		v   vae.Config
		cl  clip.Config
		err error
	)
	b, err := marshal(c.UNet)
	if err != nil {
		return u, v, cl, err
	}
	if u, err = unet.ParseConfig("unet/config.json", b); err != nil {
		return u, v, cl, err
	}
	if b, err = marshal(c.VAE); err != nil {
		return u, v, cl, err
	}
	if v, err = vae.ParseConfig("vae/config.json", b); err != nil {
		return u, v, cl, err
	}
	if b, err = marshal(c.CLIP); err != nil {
		return u, v, cl, err
	}
	if cl, err = clip.ParseConfig("image_encoder/config.json", b); err != nil {
		return u, v, cl, err
	}
	return u, v, cl, nil
}
