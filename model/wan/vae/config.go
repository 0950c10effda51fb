package vae

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
)

// Sentinel errors of the package, matched with errors.Is.
var (
	// ErrConfig: vae/config.json is unreadable or describes an impossible network.
	ErrConfig = errors.New("wan/vae: bad config")
	// ErrInput: a video or latent tensor has the wrong rank, channels or size.
	ErrInput = errors.New("wan/vae: bad input")
	// ErrFrames: a frame count the causal VAE cannot take (it needs 1 + 4k video frames).
	ErrFrames = errors.New("wan/vae: bad frame count")
	// ErrTiling: tiling options that cannot be used.
	ErrTiling = errors.New("wan/vae: bad tiling")
	// ErrWeights: the weights file is missing or does not match the config.
	ErrWeights = errors.New("wan/vae: bad weights")
)

// EncodeChunkFrames is how many video frames the encoder takes per chunk after the first
// frame (diffusers hard-codes 4).
const EncodeChunkFrames = 4

// Config is AutoencoderKLWan's config.json, with diffusers' constructor defaults for absent
// or null keys.
type Config struct {
	BaseDim            int       `json:"base_dim"`
	DecoderBaseDim     int       `json:"decoder_base_dim"` // BaseDim when null
	ZDim               int       `json:"z_dim"`
	DimMult            []int     `json:"dim_mult"`
	NumResBlocks       int       `json:"num_res_blocks"`
	AttnScales         []float64 `json:"attn_scales"`
	TemporalDownsample []bool    `json:"temperal_downsample"`
	LatentsMean        []float64 `json:"latents_mean"`
	LatentsStd         []float64 `json:"latents_std"`
	IsResidual         bool      `json:"is_residual"`
	InChannels         int       `json:"in_channels"`
	OutChannels        int       `json:"out_channels"`
	PatchSize          int       `json:"patch_size"` // 0 when null (no patchify)
	// ScaleFactorTemporal and ScaleFactorSpatial are the pipeline's factors as the file
	// states them (0 when absent). diffusers writes its defaults (4, 8) whatever the
	// network, so they are not trusted: the VAE uses TemporalFactor and SpatialFactor,
	// derived from the network.
	ScaleFactorTemporal int `json:"scale_factor_temporal"`
	ScaleFactorSpatial  int `json:"scale_factor_spatial"`
}

// rawConfig mirrors Config with pointers, to tell absent / null keys from zeros.
type rawConfig struct {
	BaseDim             *int      `json:"base_dim"`
	DecoderBaseDim      *int      `json:"decoder_base_dim"`
	ZDim                *int      `json:"z_dim"`
	DimMult             []int     `json:"dim_mult"`
	NumResBlocks        *int      `json:"num_res_blocks"`
	AttnScales          []float64 `json:"attn_scales"`
	TemporalDownsample  []bool    `json:"temperal_downsample"`
	LatentsMean         []float64 `json:"latents_mean"`
	LatentsStd          []float64 `json:"latents_std"`
	IsResidual          *bool     `json:"is_residual"`
	InChannels          *int      `json:"in_channels"`
	OutChannels         *int      `json:"out_channels"`
	PatchSize           *int      `json:"patch_size"`
	ScaleFactorTemporal *int      `json:"scale_factor_temporal"`
	ScaleFactorSpatial  *int      `json:"scale_factor_spatial"`
	ClassName           *string   `json:"_class_name"`
}

// Diffusers' AutoencoderKLWan defaults (the Wan 2.1 VAE).
var (
	defaultLatentsMean = []float64{-0.7571, -0.7089, -0.9113, 0.1075, -0.1745, 0.9653, -0.1517, 1.5508,
		0.4134, -0.0715, 0.5517, -0.3632, -0.1922, -0.9497, 0.2503, -0.2921}
	defaultLatentsStd = []float64{2.8184, 1.4541, 2.3275, 2.6558, 1.2196, 1.7708, 2.6052, 2.0743,
		3.2687, 2.1526, 2.8652, 1.5579, 1.6382, 1.1253, 2.8251, 1.9160}
)

// ParseConfig parses and validates an AutoencoderKLWan config.json (path names the file in
// errors).
func ParseConfig(path string, data []byte) (Config, error) {
	var r rawConfig
	if err := json.Unmarshal(data, &r); err != nil {
		return Config{}, fmt.Errorf("%s: %w: %v", path, ErrConfig, err)
	}
	if r.ClassName != nil && *r.ClassName != "AutoencoderKLWan" {
		return Config{}, fmt.Errorf("%s: %w: _class_name %q, want AutoencoderKLWan", path, ErrConfig, *r.ClassName)
	}
	or := func(p *int, def int) int {
		if p == nil {
			return def
		}
		return *p
	}
	c := Config{
		BaseDim:             or(r.BaseDim, 96),
		ZDim:                or(r.ZDim, 16),
		DimMult:             r.DimMult,
		NumResBlocks:        or(r.NumResBlocks, 2),
		AttnScales:          r.AttnScales,
		TemporalDownsample:  r.TemporalDownsample,
		LatentsMean:         r.LatentsMean,
		LatentsStd:          r.LatentsStd,
		InChannels:          or(r.InChannels, 3),
		OutChannels:         or(r.OutChannels, 3),
		PatchSize:           or(r.PatchSize, 0),
		ScaleFactorTemporal: or(r.ScaleFactorTemporal, 0),
		ScaleFactorSpatial:  or(r.ScaleFactorSpatial, 0),
	}
	c.DecoderBaseDim = or(r.DecoderBaseDim, c.BaseDim)
	if r.IsResidual != nil {
		c.IsResidual = *r.IsResidual
	}
	if c.DimMult == nil {
		c.DimMult = []int{1, 2, 4, 4}
	}
	if c.TemporalDownsample == nil {
		c.TemporalDownsample = []bool{false, true, true}
	}
	if c.LatentsMean == nil {
		c.LatentsMean = slices.Clone(defaultLatentsMean)
	}
	if c.LatentsStd == nil {
		c.LatentsStd = slices.Clone(defaultLatentsStd)
	}
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Validate checks that the config describes a network the reference can run.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
	}
	switch {
	case c.BaseDim <= 0 || c.DecoderBaseDim <= 0 || c.ZDim <= 0 || c.NumResBlocks <= 0:
		return bad("base_dim %d, decoder_base_dim %d, z_dim %d and num_res_blocks %d must be positive",
			c.BaseDim, c.DecoderBaseDim, c.ZDim, c.NumResBlocks)
	case c.InChannels <= 0 || c.OutChannels <= 0:
		return bad("in_channels %d and out_channels %d must be positive", c.InChannels, c.OutChannels)
	case len(c.DimMult) < 1:
		return bad("dim_mult is empty")
	case len(c.TemporalDownsample) != len(c.DimMult)-1:
		return bad("temperal_downsample has %d entries, dim_mult %d: it needs len(dim_mult)-1",
			len(c.TemporalDownsample), len(c.DimMult))
	case len(c.AttnScales) > 0:
		return bad("attn_scales %v: attention in the encoder's down blocks is not supported (diffusers v0.35.2 cannot run it either)", c.AttnScales)
	case len(c.LatentsMean) != c.ZDim || len(c.LatentsStd) != c.ZDim:
		return bad("latents_mean has %d and latents_std %d values, z_dim is %d", len(c.LatentsMean), len(c.LatentsStd), c.ZDim)
	case c.PatchSize < 0:
		return bad("patch_size %d", c.PatchSize)
	}
	for i, m := range c.DimMult {
		if m <= 0 {
			return bad("dim_mult[%d] = %d", i, m)
		}
	}
	for i, s := range c.LatentsStd {
		if s == 0 || math.IsNaN(s) || math.IsInf(s, 0) {
			return bad("latents_std[%d] = %v", i, s)
		}
	}
	nt := 0
	for _, t := range c.TemporalDownsample {
		if t {
			nt++
		}
	}
	if 1<<nt > EncodeChunkFrames {
		return bad("%d temporal downsamples: a chunk of %d frames cannot be halved that often", nt, EncodeChunkFrames)
	}
	if c.PatchSize > 1 && c.InChannels%(c.PatchSize*c.PatchSize) != 0 {
		return bad("in_channels %d is not divisible by patch_size² = %d", c.InChannels, c.PatchSize*c.PatchSize)
	}
	if c.PatchSize > 1 && c.OutChannels%(c.PatchSize*c.PatchSize) != 0 {
		return bad("out_channels %d is not divisible by patch_size² = %d", c.OutChannels, c.PatchSize*c.PatchSize)
	}
	if c.IsResidual {
		if err := c.checkResidual(); err != nil {
			return err
		}
	}
	return nil
}

// checkResidual checks the channel counts AvgDown3D and DupUp3D can regroup.
func (c Config) checkResidual() error {
	enc := c.encoderDims()
	for i := range len(c.DimMult) - 1 {
		f := 4
		if c.TemporalDownsample[i] {
			f *= 2
		}
		if enc[i]*f%enc[i+1] != 0 {
			return fmt.Errorf("%w: AvgDown3D of level %d cannot group %d·%d channels into %d", ErrConfig, i, enc[i], f, enc[i+1])
		}
	}
	dec := c.decoderDims()
	up := c.temporalUpsample()
	for i := range len(c.DimMult) - 1 {
		f := 4
		if up[i] {
			f *= 2
		}
		if dec[i+1]*f%dec[i] != 0 {
			return fmt.Errorf("%w: DupUp3D of level %d cannot spread %d channels over %d·%d", ErrConfig, i, dec[i], dec[i+1], f)
		}
	}
	return nil
}

// TemporalFactor is how many video frames each latent frame after the first stands for.
func (c Config) TemporalFactor() int {
	f := 1
	for _, t := range c.TemporalDownsample {
		if t {
			f *= 2
		}
	}
	return f
}

// SpatialFactor is the ratio of video to latent height and width (patch size included).
func (c Config) SpatialFactor() int { return (1 << len(c.TemporalDownsample)) * c.patch() }

// patch is the patch size, 1 when there is none.
func (c Config) patch() int { return max(c.PatchSize, 1) }

// LatentFrames returns the latent frames of a video of frames frames (1 + (frames−1)/T).
func (c Config) LatentFrames(frames int) int { return 1 + (frames-1)/c.TemporalFactor() }

// VideoFrames returns the frames decoded from latent frames latent frames (1 + T·(latent−1)).
func (c Config) VideoFrames(latent int) int { return 1 + c.TemporalFactor()*(latent-1) }

// CheckVideoFrames returns ErrFrames unless frames is 1 + 4k (k >= 0).
func CheckVideoFrames(frames int) error {
	if frames < 1 || (frames-1)%EncodeChunkFrames != 0 {
		lo := 1 + max(frames-1, 0)/EncodeChunkFrames*EncodeChunkFrames
		return fmt.Errorf("%w: %d video frames; the causal VAE takes 1 + 4k frames (e.g. %d or %d)", ErrFrames, frames, lo, lo+EncodeChunkFrames)
	}
	return nil
}

// encoderDims is diffusers' WanEncoder3d dims: base·[1, dim_mult...].
func (c Config) encoderDims() []int {
	d := []int{c.BaseDim}
	for _, m := range c.DimMult {
		d = append(d, c.BaseDim*m)
	}
	return d
}

// decoderDims is WanDecoder3d's dims: decoder_base·[dim_mult[-1], reversed dim_mult...].
func (c Config) decoderDims() []int {
	n := len(c.DimMult)
	d := []int{c.DecoderBaseDim * c.DimMult[n-1]}
	for i := n - 1; i >= 0; i-- {
		d = append(d, c.DecoderBaseDim*c.DimMult[i])
	}
	return d
}

// temporalUpsample is temperal_downsample reversed (the decoder's per-level flags).
func (c Config) temporalUpsample() []bool {
	u := slices.Clone(c.TemporalDownsample)
	slices.Reverse(u)
	return u
}
