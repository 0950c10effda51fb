package family

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/sched"
	"github.com/vdpp/vdpp/tensor"
)

// ErrNoDecoder is returned by Decode of a family without a decoder (the simulators).
var ErrNoDecoder = errors.New("family: the model has no decoder")

// Denoisers is the family of a model registered in package model with no conditioner or
// decoder of its own (the synthetic and dummy simulators): its denoiser is model.New with
// Options.Sim, its scheduler SVD's, and Prepare draws sample s's latent from N(0,1) with a
// PCG stream keyed by (seed, s), then a per-channel conditioning vector (under CondKey)
// from the same stream, as the benchmark's workload does.
type Denoisers struct {
	// Model is the name registered in package model ("synthetic").
	Model string
	// CondKey names the per-channel conditioning vector.
	CondKey string
}

// Name implements Family.
func (d Denoisers) Name() string { return d.Model }

// Claims implements Family: no folder names a simulator.
func (Denoisers) Claims(string) bool { return false }

// NeedsDir implements Family.
func (Denoisers) NeedsDir() bool { return false }

// ReadsParam implements ParamReader: the per-frame guidance ramp Prepare draws (the
// simulators stand in for SVD's denoiser); no other family-specific field.
func (Denoisers) ReadsParam(name string) bool {
	return name == "min_guidance" || name == "max_guidance"
}

// Preflight implements Family.
func (Denoisers) Preflight(string, Options) error { return nil }

// Describe implements Family.
func (d Denoisers) Describe(string) (Description, error) {
	return Description{Defaults: (&denoiserSampler{}).DefaultParams(), SizeMultiple: 8}, nil
}

// Open implements Family.
func (d Denoisers) Open(dir string, o Options) (Sampler, error) {
	cfg := o.Sim
	cfg.Name, cfg.Dir, cfg.Backend = d.Model, dir, o.Backend
	var den model.Denoiser
	if o.Roles.Denoise {
		var err error
		if den, err = model.New(cfg); err != nil {
			return nil, err
		}
	}
	return &denoiserSampler{fam: d, cfg: cfg, den: den}, nil
}

type denoiserSampler struct {
	fam Denoisers
	cfg model.Config
	den model.Denoiser
}

func (s *denoiserSampler) Family() string { return s.fam.Model }

// DefaultParams are SVD's defaults at a 64x64 size.
func (s *denoiserSampler) DefaultParams() Params {
	return Params{NumFrames: 14, Steps: 25, Height: 64, Width: 64, MinGuidance: 1, MaxGuidance: 3,
		FPS: 7, MotionBucketID: 127, NoiseAugStrength: 0.02}
}

func (s *denoiserSampler) Validate(p Params) error {
	if p.NumFrames < 1 || p.Steps < 1 || p.Height < 8 || p.Width < 8 || p.Height%8 != 0 || p.Width%8 != 0 {
		return fmt.Errorf("%w: %d frames, %d steps, %dx%d (sizes: positive multiples of 8)", ErrParams, p.NumFrames, p.Steps, p.Width, p.Height)
	}
	return nil
}

func (s *denoiserSampler) channels() int {
	if s.cfg.LatentChannels > 0 {
		return s.cfg.LatentChannels
	}
	return 4
}

func (s *denoiserSampler) LatentShape(p Params) []int {
	return []int{p.NumFrames, s.channels(), p.Height / 8, p.Width / 8}
}

func (s *denoiserSampler) Scheduler(steps int) (sched.Scheduler, error) {
	sc, err := sched.New(sched.DefaultSVDConfig(), steps)
	if err != nil {
		return nil, err
	}
	return sc, nil
}

func (s *denoiserSampler) Prepare(ctx context.Context, _ Input, p Params, sc sched.Scheduler, samples []int64) (*pipeline.Item, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	shape := s.LatentShape(p)
	per := tensor.NumElements(shape)
	it := &pipeline.Item{Samples: samples, Latent: tensor.New(append([]int{len(samples)}, shape...)...)}
	for row, sample := range samples {
		r := rand.New(rand.NewPCG(uint64(p.Seed), uint64(sample)))
		dst := it.Latent.Data[row*per : (row+1)*per]
		for i := range dst {
			dst[i] = float32(r.NormFloat64()) * sc.InitSigma()
		}
		vec := tensor.New(shape[1])
		for i := range vec.Data {
			vec.Data[i] = float32(r.NormFloat64())
		}
		it.Cond = append(it.Cond, model.Conditioning{s.fam.CondKey: vec})
	}
	if p.Guided() {
		it.Guidance = sched.GuidanceWeights(float32(p.MinGuidance), float32(p.MaxGuidance), p.NumFrames)
	}
	return it, nil
}

// WindowGuidance implements WindowGuider: every window rises as a whole clip does.
func (s *denoiserSampler) WindowGuidance(p Params, frames int) []float32 {
	if !p.Guided() {
		return nil
	}
	return sched.GuidanceWeights(float32(p.MinGuidance), float32(p.MaxGuidance), frames)
}

func (s *denoiserSampler) Stepper(sc sched.Scheduler) (*pipeline.Stepper, error) {
	if s.den == nil {
		return nil, fmt.Errorf("family: %s: this process did not load the denoiser", s.fam.Model)
	}
	return &pipeline.Stepper{Model: s.den, Sched: sc}, nil
}

func (s *denoiserSampler) Decode(context.Context, *tensor.Dense, Params) (*tensor.Dense, error) {
	return nil, fmt.Errorf("%w: %s", ErrNoDecoder, s.fam.Model)
}

func (s *denoiserSampler) WeightBytes() map[string]int64 {
	if s.den == nil {
		return map[string]int64{}
	}
	return map[string]int64{"denoiser": s.den.WeightBytes()}
}

func (s *denoiserSampler) Close() error {
	if c, ok := s.den.(model.Closer); ok {
		return c.Close()
	}
	return nil
}
