package vae

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/gomlx/gomlx/backends"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import

	"github.com/vdpp/vdpp/model/checkpoint"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/tensor"
)

// Posterior is the diagonal Gaussian over latents that Encode returns: Moments
// [B, 2z, f, h, w] (the quant_conv output), Mean, LogVar (clamped to [-30, 20]) and
// Std = exp(LogVar/2), each [B, z, f, h, w].
type Posterior struct {
	Moments, Mean, LogVar, Std *tensor.Dense
}

// Mode returns the posterior's mode, its mean.
func (p Posterior) Mode() *tensor.Dense { return p.Mean }

// Options are the VAE's run options.
type Options struct {
	// Tiling, when not nil, encodes and decodes frames larger than one tile in
	// overlapping spatial tiles (diffusers' enable_tiling).
	Tiling *Tiling
}

// VAE is a loaded AutoencoderKLWan. It is safe for concurrent use.
type VAE struct {
	cfg     Config
	weights *nn.Weights
	enc     *nn.Program // one encoder chunk: (video chunk, caches...) -> (moments, caches...)
	dec     *nn.Program // one decoder step: (latent frames, caches...) -> (frames, caches...)
	opts    Options
}

// Load reads vaeDir/config.json and the weights file of variant ("" for
// diffusion_pytorch_model.safetensors, "fp16" for diffusion_pytorch_model.fp16.safetensors,
// ...; or the shards of its .index.json; fp16 / bf16 weights stay as stored until they are
// converted to float32 one tensor at a time onto backend) and builds the VAE on backend.
func Load(vaeDir, variant string, backend backends.Backend) (*VAE, error) {
	cfgPath := filepath.Join(vaeDir, "config.json")
	data, err := os.ReadFile(cfgPath)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	cfg, err := ParseConfig(cfgPath, data)
	if err != nil {
		return nil, err
	}
	want, err := ExpectedTensors(cfg)
	if err != nil {
		return nil, err
	}
	name, err := checkpoint.WeightsFileName(checkpoint.DiffusersStem, variant)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrWeights, err)
	}
	st, err := checkpoint.OpenDir(vaeDir, strings.TrimSuffix(name, ".safetensors"), want, checkpoint.LoadDirOptions{})
	if errors.Is(err, checkpoint.ErrWeights) {
		path := filepath.Join(vaeDir, name)
		have, _ := filepath.Glob(filepath.Join(vaeDir, "*.safetensors"))
		for i := range have {
			have[i] = filepath.Base(have[i])
		}
		return nil, fmt.Errorf("%w: %s: no weights for variant %q (safetensors files there: %v)", ErrWeights, path, variant, have)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrWeights, err)
	}
	defer st.Close()
	if backend == nil {
		return nil, errors.New("wan/vae: nil backend")
	}
	w, err := nn.NewWeightsStream(backend, st.Each)
	if err != nil {
		return nil, fmt.Errorf("wan/vae: %w", err)
	}
	return bind(cfg, w, backend)
}

// New builds the VAE from cfg and weights named as the diffusers state_dict, which must
// hold exactly ExpectedTensors(cfg). The weights are copied onto backend.
func New(cfg Config, weights map[string]*tensor.Dense, backend backends.Backend) (*VAE, error) {
	want, err := ExpectedTensors(cfg)
	if err != nil {
		return nil, err
	}
	if _, err := nn.CheckWeights(want, weights); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrWeights, err)
	}
	w, err := nn.NewWeights(backend, weights)
	if err != nil {
		return nil, fmt.Errorf("wan/vae: %w", err)
	}
	return bind(cfg, w, backend)
}

// bind builds the encoder and decoder programs over weights already on backend.
func bind(cfg Config, w *nn.Weights, backend backends.Backend) (*VAE, error) {
	var err error
	v := &VAE{cfg: cfg, weights: w}
	v.enc, err = nn.NewProgram(backend, w, "wan.vae.encode", func(s nn.Scope, in []*Node) []*Node {
		c := &stepCache{first: len(in) == 1, in: in[1:]}
		x := patchify(in[0], cfg.patch())
		return append([]*Node{buildEncodeChunk(s, x.Graph(), x, c, cfg)}, c.out...)
	})
	if err != nil {
		return nil, fmt.Errorf("wan/vae: %w", err)
	}
	v.dec, err = nn.NewProgram(backend, w, "wan.vae.decode", func(s nn.Scope, in []*Node) []*Node {
		c := &stepCache{first: len(in) == 1, in: in[1:]}
		y := buildDecodeChunk(s, in[0].Graph(), in[0], c, cfg)
		return append([]*Node{unpatchify(y, cfg.patch())}, c.out...)
	})
	if err != nil {
		_ = v.enc.Close()
		return nil, fmt.Errorf("wan/vae: %w", err)
	}
	return v, nil
}

// WithOptions returns a VAE sharing v's weights and programs that runs with opts.
func (v *VAE) WithOptions(opts Options) (*VAE, error) {
	if opts.Tiling != nil {
		if err := opts.Tiling.check(v.cfg); err != nil {
			return nil, err
		}
	}
	c := *v
	c.opts = opts
	return &c, nil
}

// Config returns the VAE's configuration.
func (v *VAE) Config() Config { return v.cfg }

// Options returns the options the VAE runs with.
func (v *VAE) Options() Options { return v.opts }

// WeightBytes returns the memory held by the weights (fp32).
func (v *VAE) WeightBytes() int64 { return v.weights.Bytes() }

// Close releases the compiled programs (of every VAE sharing them). The VAE must not be
// used afterwards.
func (v *VAE) Close() error {
	var errs []error
	for _, p := range []*nn.Program{v.enc, v.dec} {
		if p != nil {
			errs = append(errs, p.Close())
		}
	}
	return errors.Join(errs...)
}

// videoChannels is the channel count of videos (in_channels / patch²).
func (c Config) videoChannels(out bool) int {
	ch := c.InChannels
	if out {
		ch = c.OutChannels
	}
	return ch / (c.patch() * c.patch())
}

// checkVideo checks a whole video [B, C, F, H, W] for Encode.
func (v *VAE) checkVideo(video *tensor.Dense) error {
	if err := checkTensor(video, 5, v.cfg.videoChannels(false), "video"); err != nil {
		return err
	}
	if err := CheckVideoFrames(video.Shape[2]); err != nil {
		return err
	}
	s := v.cfg.SpatialFactor()
	if video.Shape[3]%s != 0 || video.Shape[4]%s != 0 {
		return fmt.Errorf("%w: video %v: height and width must be multiples of %d", ErrInput, video.Shape, s)
	}
	return nil
}

// Encode runs the encoder over video [B, C, F, H, W] (F = 1 + 4k, H and W multiples of
// SpatialFactor) in diffusers' chunks and returns the posterior over latents
// [B, z, 1 + (F−1)/T, H/S, W/S].
func (v *VAE) Encode(video *tensor.Dense) (Posterior, error) {
	if err := v.checkVideo(video); err != nil {
		return Posterior{}, err
	}
	cache := v.NewEncodeCache()
	defer cache.Close()
	var parts []*tensor.Dense
	for _, r := range EncodeChunks(video.Shape[2]) {
		m, err := v.EncodeChunk(cache, sliceTime(video, r[0], r[1]))
		if err != nil {
			return Posterior{}, err
		}
		parts = append(parts, m)
	}
	moments, err := concatAxis(parts, 2)
	if err != nil {
		return Posterior{}, err
	}
	return NewPosterior(moments, v.cfg.ZDim)
}

// EncodeChunks returns the [start, end) frame ranges the encoder runs on for a video of
// frames frames: [0, 1), then [1, 5), [5, 9), ...
func EncodeChunks(frames int) [][2]int {
	out := [][2]int{{0, 1}}
	for s := 1; s+EncodeChunkFrames <= frames; s += EncodeChunkFrames {
		out = append(out, [2]int{s, s + EncodeChunkFrames})
	}
	return out
}

// NewPosterior splits moments [B, 2z, f, h, w] into the posterior as
// DiagonalGaussianDistribution does (float32).
func NewPosterior(moments *tensor.Dense, z int) (Posterior, error) {
	if err := checkTensor(moments, 5, 2*z, "moments"); err != nil {
		return Posterior{}, err
	}
	d := moments.Shape
	shape := []int{d[0], z, d[2], d[3], d[4]}
	p := Posterior{Moments: moments, Mean: tensor.New(shape...), LogVar: tensor.New(shape...), Std: tensor.New(shape...)}
	per := z * tensor.NumElements(d[2:])
	for b := range d[0] {
		copy(p.Mean.Data[b*per:(b+1)*per], moments.Data[2*b*per:(2*b+1)*per])
		lv := moments.Data[(2*b+1)*per : (2*b+2)*per]
		for i, x := range lv {
			x = min(max(x, logvarMin), logvarMax)
			p.LogVar.Data[b*per+i] = x
			p.Std.Data[b*per+i] = float32(math.Exp(float64(float32(0.5) * x)))
		}
	}
	return p, nil
}

// Decode decodes latents [B, z, f, h, w] (already denormalised) to a video
// [B, C, 1 + T·(f−1), h·S, w·S], frame by frame with the causal caches, clamped to
// [-1, 1] (a tiled decode is not clamped, as in diffusers).
func (v *VAE) Decode(latents *tensor.Dense) (*tensor.Dense, error) {
	var parts []*tensor.Dense
	err := v.DecodeStream(latents, func(frames *tensor.Dense) error {
		parts = append(parts, frames)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return concatAxis(parts, 2)
}

// DecodeStream decodes latents like Decode but hands each latent frame's video frames
// [B, C, n, H, W] (n = 1 for the first, T after) to yield as soon as they are decoded, so
// memory stays flat in the video's length; an error from yield stops the decode.
func (v *VAE) DecodeStream(latents *tensor.Dense, yield func(frames *tensor.Dense) error) error {
	if err := checkTensor(latents, 5, v.cfg.ZDim, "latents"); err != nil {
		return err
	}
	cache := v.NewDecodeCache()
	defer cache.Close()
	for k := range latents.Shape[2] {
		frames, err := v.DecodeFrame(cache, sliceTime(latents, k, k+1))
		if err != nil {
			return err
		}
		if err := yield(frames); err != nil {
			return err
		}
	}
	return nil
}
