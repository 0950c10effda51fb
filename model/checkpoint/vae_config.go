package checkpoint

import "math"

// VAEClassName is the diffusers class of the SVD VAE.
const VAEClassName = "AutoencoderKLTemporalDecoder"

// DownEncoderBlock2D is the only encoder block type of AutoencoderKLTemporalDecoder.
const DownEncoderBlock2D = "DownEncoderBlock2D"

// VAEConfig is vae/config.json of an AutoencoderKLTemporalDecoder, with diffusers'
// constructor defaults for absent keys.
type VAEConfig struct {
	Path string // the file it was read from

	InChannels       int      // default 3
	OutChannels      int      // default 3
	DownBlockTypes   []string // default ["DownEncoderBlock2D"]
	BlockOutChannels []int    // default [64]
	LayersPerBlock   int      // default 1
	LatentChannels   int      // default 4
	SampleSize       int      // default 32
	ScalingFactor    float64  // default 0.18215
	ForceUpcast      bool     // default true
}

// ParseVAEConfig parses and validates a VAE config; path names the file in errors.
func ParseVAEConfig(path string, data []byte) (VAEConfig, error) {
	f, err := parseFields(path, data, ErrConfig)
	if err != nil {
		return VAEConfig{}, err
	}
	if cls := f.str("_class_name", VAEClassName); cls != VAEClassName {
		f.fail("_class_name", "%q is not %s", cls, VAEClassName)
	}
	c := VAEConfig{
		Path:             path,
		InChannels:       f.int("in_channels", 3),
		OutChannels:      f.int("out_channels", 3),
		DownBlockTypes:   f.strs("down_block_types", []string{DownEncoderBlock2D}),
		BlockOutChannels: f.ints("block_out_channels", []int{64}),
		LayersPerBlock:   f.int("layers_per_block", 1),
		LatentChannels:   f.int("latent_channels", 4),
		SampleSize:       f.int("sample_size", 32),
		ScalingFactor:    f.float("scaling_factor", 0.18215),
		ForceUpcast:      f.bool("force_upcast", true),
	}
	if f.err != nil {
		return VAEConfig{}, f.err
	}
	if err := c.Validate(); err != nil {
		return VAEConfig{}, err
	}
	return c, nil
}

// NumBlocks is the number of encoder down blocks (and decoder up blocks).
func (c VAEConfig) NumBlocks() int { return len(c.BlockOutChannels) }

// DownsampleFactor is the spatial ratio between images and latents: 2^(NumBlocks-1).
func (c VAEConfig) DownsampleFactor() int { return 1 << (c.NumBlocks() - 1) }

// Validate checks the consistency the encoder and temporal decoder rely on. Errors name the
// config file.
func (c VAEConfig) Validate() error {
	k := checker{path: c.Path}
	n := len(c.BlockOutChannels)
	k.check(n > 0, "block_out_channels is empty")
	k.check(len(c.DownBlockTypes) == n, "%d down_block_types for %d block_out_channels", len(c.DownBlockTypes), n)
	for i, t := range c.DownBlockTypes {
		k.check(t == DownEncoderBlock2D, "down_block_types[%d]: unsupported block type %q (want %s)", i, t, DownEncoderBlock2D)
	}
	for i, ch := range c.BlockOutChannels {
		k.check(ch > 0 && ch%GroupNormGroups == 0, "block_out_channels[%d] = %d is not a positive multiple of the %d GroupNorm groups", i, ch, GroupNormGroups)
	}
	k.check(c.InChannels > 0 && c.OutChannels > 0, "in_channels %d and out_channels %d must be positive", c.InChannels, c.OutChannels)
	k.check(c.LatentChannels > 0, "latent_channels %d must be positive", c.LatentChannels)
	k.check(c.LayersPerBlock > 0, "layers_per_block %d must be positive", c.LayersPerBlock)
	k.check(c.SampleSize > 0, "sample_size %d must be positive", c.SampleSize)
	k.check(c.ScalingFactor > 0 && !math.IsInf(c.ScalingFactor, 0), "scaling_factor %g must be positive and finite", c.ScalingFactor)
	return k.err
}
