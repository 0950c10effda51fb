// Package svd assembles Stable Video Diffusion from its networks (model/svd/unet, vae,
// clip) the way diffusers' StableVideoDiffusionPipeline does: conditioning from an image
// (CLIP image embedding, VAE encoding of the noise-augmented image, added time ids), a
// model.Denoiser around the UNet (image latents concatenated on the channel axis,
// unconditional rows with zero embedding and zero image latents), and decoding of final
// latents into frames. Sampler is SVD's family.Sampler (registered as the "svd" family for
// folders whose model_index.json names StableVideoDiffusionPipeline): every command runs
// SVD through it. The Denoiser is also a model.StepCacher (cache.go, Caching): DeepCache,
// a static schedule that reuses whole calls, and an adaptive first-block rule.
//
// Contract: a process loads only what its pipeline role needs (Parts): stage 0 the image
// encoder and VAE encoder, every stage the UNet, the last stage the VAE decoder. Every size
// comes from the checkpoint's configs. Noise is drawn from a PCG stream keyed by (seed,
// sample) — augmentation noise first, then the initial latents, in diffusers' order — so the
// same seed gives bit-identical results in any number of processes.
package svd

import (
	"errors"
	"strings"

	"github.com/gomlx/gomlx/backends"

	"github.com/vdpp/vdpp/model/checkpoint"
	"github.com/vdpp/vdpp/model/clip"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/model/svd/unet"
	"github.com/vdpp/vdpp/model/svd/vae"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/sched"
)

// ErrParams is returned for generation parameters the checkpoint cannot serve: it is
// family.ErrParams (the errors are *knob.Error, naming the knob).
var ErrParams = family.ErrParams

// Parts selects the components a process loads.
type Parts struct {
	Conditioner bool // image encoder + VAE encoder (pipeline stage 0)
	Denoiser    bool // UNet (every stage)
	Decoder     bool // VAE decoder (last stage)
}

// AllParts loads everything (a one-process run).
var AllParts = Parts{Conditioner: true, Denoiser: true, Decoder: true}

// Pipeline holds the loaded components and configs.
type Pipeline struct {
	Checkpoint *checkpoint.Checkpoint
	UNetConfig unet.Config
	VAEConfig  vae.Config
	CLIPConfig clip.Config
	Features   clip.FeatureExtractorConfig
	Sched      sched.Config

	UNet   *unet.Model // nil unless Parts.Denoiser
	CLIP   *clip.Model // nil unless Parts.Conditioner
	VAEEnc *vae.Model  // nil unless Parts.Conditioner
	VAEDec *vae.Model  // nil unless Parts.Decoder

	// Backend is what the networks run on (nil when no part is loaded).
	Backend backends.Backend
}

// Load opens the diffusers folder dir and loads parts onto backend. variant is "" (fp32) or
// "fp16"; fp16 weights are converted to float32.
func Load(dir, variant string, backend backends.Backend, parts Parts) (*Pipeline, error) {
	return LoadWith(dir, LoadOptions{Variant: variant}, backend, parts)
}

// LoadOptions say where the weights come from: the folder's variant, and a file replacing
// the folder's UNet weights (--unet).
type LoadOptions struct {
	Variant  string
	UNetFile string
	// UNetDeltas (LoRAs' changes, by weight name) are merged into the UNet's weights as
	// they load.
	UNetDeltas map[string][]nn.Delta
	// Hold says the type the UNet's tensors are held in (nil: as stored).
	Hold nn.HoldFunc
}

// LoadWith is Load with the weights o names.
func LoadWith(dir string, o LoadOptions, backend backends.Backend, parts Parts) (*Pipeline, error) {
	variant := o.Variant
	ck, err := checkpoint.Open(dir)
	if err != nil {
		return nil, err
	}
	p := &Pipeline{Checkpoint: ck, Backend: backend}
	if p.UNetConfig, err = unet.ReadConfig(ck); err != nil {
		return nil, err
	}
	if p.VAEConfig, err = vae.ReadConfig(ck); err != nil {
		return nil, err
	}
	if p.CLIPConfig, err = clip.ReadConfig(ck); err != nil {
		return nil, err
	}
	if p.Features, err = clip.ReadFeatureExtractor(ck); err != nil {
		return nil, err
	}
	schedPath, err := ck.ConfigPath(Scheduler)
	if err != nil {
		return nil, err
	}
	if p.Sched, err = sched.LoadConfig(schedPath); err != nil {
		return nil, err
	}
	if parts.Denoiser {
		if p.UNet, err = unet.LoadWith(ck, unet.LoadOptions{Variant: variant, File: o.UNetFile, Deltas: o.UNetDeltas, Hold: o.Hold}, backend); err != nil {
			return nil, err
		}
	}
	if parts.Conditioner {
		if p.CLIP, err = clip.Load(ck, clipVariant(ck, variant), backend); err != nil {
			return nil, p.closeAfter(err)
		}
		if p.VAEEnc, err = vae.LoadParts(ck, vaeVariant(ck, variant), backend, true, false); err != nil {
			return nil, p.closeAfter(err)
		}
	}
	if parts.Decoder {
		if p.VAEDec, err = vae.LoadParts(ck, vaeVariant(ck, variant), backend, false, true); err != nil {
			return nil, p.closeAfter(err)
		}
	}
	return p, nil
}

// clipVariant and vaeVariant fall back to the fp32 file when a component has no file of the
// requested variant (the diffusers loader does the same per component).
func clipVariant(ck *checkpoint.Checkpoint, variant string) string {
	return fallbackVariant(ck, clip.Component, variant)
}

func vaeVariant(ck *checkpoint.Checkpoint, variant string) string {
	return fallbackVariant(ck, vae.Component, variant)
}

func fallbackVariant(ck *checkpoint.Checkpoint, component, variant string) string {
	if variant == "" {
		return ""
	}
	if _, err := ck.WeightsPath(component, variant); err != nil {
		return ""
	}
	return variant
}

func (p *Pipeline) closeAfter(err error) error {
	return errors.Join(err, p.Close())
}

// Close releases every loaded component.
func (p *Pipeline) Close() error {
	var errs []error
	if p.UNet != nil {
		errs = append(errs, p.UNet.Close())
	}
	if p.CLIP != nil {
		errs = append(errs, p.CLIP.Close())
	}
	if p.VAEEnc != nil {
		errs = append(errs, p.VAEEnc.Close())
	}
	if p.VAEDec != nil {
		errs = append(errs, p.VAEDec.Close())
	}
	return errors.Join(errs...)
}

// WeightBytes reports the weight memory held, per component.
func (p *Pipeline) WeightBytes() map[string]int64 {
	out := map[string]int64{}
	if p.UNet != nil {
		out["unet"] = p.UNet.WeightBytes()
	}
	if p.CLIP != nil {
		out["image_encoder"] = p.CLIP.WeightBytes()
	}
	if p.VAEEnc != nil {
		out["vae_encoder"] = p.VAEEnc.WeightBytes()
	}
	if p.VAEDec != nil {
		out["vae_decoder"] = p.VAEDec.WeightBytes()
	}
	return out
}

// Params are SVD's generation parameters: the family's (family.Params), with the
// pipeline's defaults from DefaultParams.
type Params = family.Params

// DefaultParams returns diffusers' defaults for this checkpoint: NativeSize (576x1024 for the
// released models), num_frames from the UNet config, 25 steps, guidance 1 -> 3, fps 7,
// motion bucket 127, augmentation 0.02.
func (p *Pipeline) DefaultParams() Params {
	h, w := NativeSize(p.VAEConfig)
	return Params{
		NumFrames: p.UNetConfig.NumFrames, Steps: 25, Height: h, Width: w,
		MinGuidance: 1, MaxGuidance: 3, FPS: 7, MotionBucketID: 127, NoiseAugStrength: 0.02,
	}
}

// NativeSize is the video size a checkpoint generates by default: 576x1024 (height x
// width, the diffusers pipeline's default) for a VAE of sample_size 512 or more, as the
// released SVD models have, and a sample_size square otherwise (small models such as the
// built-in one, 64x64).
func NativeSize(vcfg vae.Config) (height, width int) {
	if vcfg.SampleSize >= 512 || vcfg.SampleSize <= 0 {
		return 576, 1024
	}
	return vcfg.SampleSize, vcfg.SampleSize
}

// Validate checks the parameters against the checkpoint.
func (p *Pipeline) Validate(pr Params) error {
	f := p.VAEConfig.DownsampleFactor()
	switch {
	case pr.NumFrames < 1:
		return Knobs.Errorf("num_frames", "{num_frames} %d: a video needs at least 1 frame", pr.NumFrames)
	case pr.Steps < 1:
		return Knobs.Errorf("steps", "{steps} %d: a run needs at least 1 step", pr.Steps)
	case pr.Height < f || pr.Width < f || pr.Height%f != 0 || pr.Width%f != 0:
		return Knobs.Errorf("width", "{width} %d and {height} %d must be positive multiples of %d (the VAE's factor)", pr.Width, pr.Height, f)
	case pr.MinGuidance > pr.MaxGuidance:
		return Knobs.Errorf("min_guidance", "{min_guidance} %v is above {max_guidance} %v", pr.MinGuidance, pr.MaxGuidance)
	case pr.VAETile < -1:
		return Knobs.Errorf("vae_tile", "{vae_tile} %d (0: off, -1: the VAE's sample_size)", pr.VAETile)
	}
	if _, err := p.tiling(pr); err != nil {
		return err
	}
	if err := (family.Description{Schedulers: sched.KarrasSamplers}).CheckScheduler(pr.SchedulerChoice); err != nil {
		return err
	}
	return checkCacheBranch(p.UNetConfig, pr.Cache)
}

// checkCacheBranch refuses a cache rule whose branch the UNet does not have.
func checkCacheBranch(cfg unet.Config, c pipeline.Cache) error {
	if c.On() && c.Mode != pipeline.CacheStatic {
		if n := unet.Branches(cfg); c.Branch < 0 || c.Branch >= n {
			return Knobs.Errorf("cache_branch", "{cache_branch} %d: the UNet has branches 0..%d", c.Branch, n-1)
		}
	}
	return nil
}

// tiling is the VAE tiling pr asks for (zero: none).
func (p *Pipeline) tiling(pr Params) (vae.Tiling, error) {
	t := vae.Tiling{Sample: pr.VAETile, Overlap: vae.DefaultTileOverlap}
	switch {
	case pr.VAETile == 0:
		return vae.Tiling{}, nil
	case pr.VAETile == -1:
		t.Sample = p.VAEConfig.SampleSize
	}
	if err := t.Check(p.VAEConfig.DownsampleFactor()); err != nil {
		return vae.Tiling{}, Knobs.Errorf("vae_tile", "{vae_tile} %d: %s", pr.VAETile, strings.TrimPrefix(err.Error(), vae.ErrInput.Error()+": "))
	}
	return t, nil
}

// vaeFor returns m tiled as pr asks.
func (p *Pipeline) vaeFor(m *vae.Model, pr Params) (*vae.Model, error) {
	t, err := p.tiling(pr)
	if err != nil {
		return nil, err
	}
	return m.WithTiling(t)
}

// LatentShape is one sample's latent [T, C, h, w].
func (p *Pipeline) LatentShape(pr Params) []int {
	f := p.VAEConfig.DownsampleFactor()
	return []int{pr.NumFrames, p.UNetConfig.InChannels / 2, pr.Height / f, pr.Width / f} // diffusers: in_channels // 2
}
