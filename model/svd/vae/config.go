package vae

import (
	"math"

	"github.com/vdpp/vdpp/model/checkpoint"
)

// ClassName is the diffusers class of the SVD VAE.
const ClassName = "AutoencoderKLTemporalDecoder"

// DownEncoderBlock2D is the only encoder block type of AutoencoderKLTemporalDecoder.
const DownEncoderBlock2D = "DownEncoderBlock2D"

// GroupNormGroups is the group count of every GroupNorm in the VAE (fixed in diffusers,
// not a config key).
const GroupNormGroups = 32

// Component is the VAE's folder in an SVD pipeline folder (model_index.json's key).
const Component = "vae"

// ReadConfig reads and validates the VAE's config.json of ck.
func ReadConfig(ck *checkpoint.Checkpoint) (Config, error) {
	path, data, err := ck.ReadConfig(Component)
	if err != nil {
		return Config{}, err
	}
	return ParseConfig(path, data)
}

// Config is vae/config.json of an AutoencoderKLTemporalDecoder, with diffusers'
// constructor defaults for absent keys.
type Config struct {
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

// ParseConfig parses and validates a VAE config; path names the file in errors.
func ParseConfig(path string, data []byte) (Config, error) {
	f, err := checkpoint.ParseFields(path, data, checkpoint.ErrConfig)
	if err != nil {
		return Config{}, err
	}
	if cls := f.Str("_class_name", ClassName); cls != ClassName {
		f.Fail("_class_name", "%q is not %s", cls, ClassName)
	}
	c := Config{
		Path:             path,
		InChannels:       f.Int("in_channels", 3),
		OutChannels:      f.Int("out_channels", 3),
		DownBlockTypes:   f.Strs("down_block_types", []string{DownEncoderBlock2D}),
		BlockOutChannels: f.Ints("block_out_channels", []int{64}),
		LayersPerBlock:   f.Int("layers_per_block", 1),
		LatentChannels:   f.Int("latent_channels", 4),
		SampleSize:       f.Int("sample_size", 32),
		ScalingFactor:    f.Float("scaling_factor", 0.18215),
		ForceUpcast:      f.Bool("force_upcast", true),
	}
	if f.Err() != nil {
		return Config{}, f.Err()
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// NumBlocks is the number of encoder down blocks (and decoder up blocks).
func (c Config) NumBlocks() int { return len(c.BlockOutChannels) }

// DownsampleFactor is the spatial ratio between images and latents: 2^(NumBlocks-1).
func (c Config) DownsampleFactor() int { return 1 << (c.NumBlocks() - 1) }

// EncodeActivationBytes estimates the float32 working bytes of the encoder's largest layer
// on one height x width image, as unetcost counts the UNet's (weights not included): a
// convolution's input, its normalised copy and its output at full size and below, or the
// mid block's attention (its q, k, v and output, one head's scores and their softmax over
// the smallest level's positions), whichever is largest. EncodeActivationBytes is pure.
func (c Config) EncodeActivationBytes(height, width int) int64 {
	n := len(c.BlockOutChannels)
	if n == 0 {
		return 0
	}
	area := int64(max(height, 0)) * int64(max(width, 0))
	peak := (2*int64(c.InChannels) + int64(c.BlockOutChannels[0])) * area // conv_in
	in := int64(c.BlockOutChannels[0])
	for i, out := range c.BlockOutChannels {
		cout := int64(out)
		peak = max(peak, (2*in+cout)*area, 3*cout*area) // a resnet's two convolutions
		in = cout
		if i < n-1 {
			peak = max(peak, 2*cout*area+cout*area/4) // the stride-2 downsample
			area /= 4
		}
	}
	attn := 2*area*area + 5*in*area
	return 4 * max(peak, attn)
}

// Validate checks the consistency the encoder and temporal decoder rely on. Errors name the
// config file.
func (c Config) Validate() error {
	k := checkpoint.Checker{Path: c.Path}
	n := len(c.BlockOutChannels)
	k.Check(n > 0, "block_out_channels is empty")
	k.Check(len(c.DownBlockTypes) == n, "%d down_block_types for %d block_out_channels", len(c.DownBlockTypes), n)
	for i, t := range c.DownBlockTypes {
		k.Check(t == DownEncoderBlock2D, "down_block_types[%d]: unsupported block type %q (want %s)", i, t, DownEncoderBlock2D)
	}
	for i, ch := range c.BlockOutChannels {
		k.Check(ch > 0 && ch%GroupNormGroups == 0, "block_out_channels[%d] = %d is not a positive multiple of the %d GroupNorm groups", i, ch, GroupNormGroups)
	}
	k.Check(c.InChannels > 0 && c.OutChannels > 0, "in_channels %d and out_channels %d must be positive", c.InChannels, c.OutChannels)
	k.Check(c.LatentChannels > 0, "latent_channels %d must be positive", c.LatentChannels)
	k.Check(c.LayersPerBlock > 0, "layers_per_block %d must be positive", c.LayersPerBlock)
	k.Check(c.SampleSize > 0, "sample_size %d must be positive", c.SampleSize)
	k.Check(c.ScalingFactor > 0 && !math.IsInf(c.ScalingFactor, 0), "scaling_factor %g must be positive and finite", c.ScalingFactor)
	return k.Err()
}
