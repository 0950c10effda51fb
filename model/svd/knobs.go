package svd

import "github.com/vdpp/vdpp/model/knob"

// Knobs is SVD's knob table (family.Family.Knobs): the common knobs with the cache modes
// its UNet runs, and SVD's own: the per-frame guidance ramp (diffusers' min_guidance_scale
// and max_guidance_scale; the OpenAI API's guidance_scale sets the last frame's), the motion
// and noise-augmentation conditioning, the decode chunk and VAE tiling.
var Knobs = append(knob.Common(Caching.Modes...),
	MinGuidance, MaxGuidance,
	knob.Knob{Name: "motion_bucket_id", Kind: knob.Int, Min: 0, Max: 1023, Group: knob.Advanced,
		Help: "motion conditioning: higher moves more (127 by default)"},
	knob.Knob{Name: "noise_aug_strength", Kind: knob.Float, Min: 0, Max: 10, Group: knob.Advanced,
		Help: "noise added to the conditioning image (0.02 by default)"},
	knob.Knob{Name: "decode_chunk_size", Kind: knob.Int, Min: 0, Max: knob.MaxFrames, Group: knob.Advanced,
		Help: "frames the VAE decodes at once (0: all; the folder's vdpp_sampling.json, else all, by default)"},
	knob.Knob{Name: "vae_tile", Kind: knob.Int, Min: -1, Max: knob.MaxSize, Default: "0", Group: knob.Advanced,
		Help: "decode (and encode) in overlapping spatial tiles of this many pixels, as diffusers' enable_tiling (0: whole frames; -1: the VAE's sample_size)"},
)

// MinGuidance and MaxGuidance are the guidance weights of a clip's first and last frame,
// ramped linearly between (diffusers' min_guidance_scale, max_guidance_scale); a max above
// 1 turns classifier-free guidance on. The simulator families share them.
var (
	MinGuidance = knob.Knob{Name: "min_guidance", Kind: knob.Float, Min: 0, Max: 100, AtMost: "max_guidance", Group: knob.Advanced,
		Help: "guidance weight of the first frame (the folder's vdpp_sampling.json, else 1, by default)"}
	MaxGuidance = knob.Knob{Name: "max_guidance", OpenAIAlso: []string{"guidance_scale"}, Kind: knob.Float, Min: 0, Max: 100, Mesh: knob.Guides, Group: knob.Basic,
		Help: "guidance weight of the last frame; above 1 turns classifier-free guidance on (the folder's vdpp_sampling.json, else 3, by default)"}
)

// Knobs implements family.Family.
func (svdFamily) Knobs() knob.Table { return Knobs }
