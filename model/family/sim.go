package family

import (
	"context"
	"fmt"
	"image"
	"math"
	"math/rand/v2"

	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/model/knob"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/sched"
	"github.com/vdpp/vdpp/tensor"
)

// Simulator is the registered name of the stand-in denoiser whose step costs what it is
// told (model/families registers it): the default of a command that needs a model and
// was given none (serve's workers, the load test).
const Simulator = "synthetic"

// Denoisers is the family of a simulator denoiser (synthetic, dummy): a denoiser built by
// New from Options.Sim, with SVD's scheduler and no network of its own around it. Prepare
// draws sample s's latent from N(0,1) with a PCG stream keyed by (seed, s), then a
// per-channel conditioning vector (under CondKey) from the same stream, as the
// benchmark's workload does; given an image, the vector's first three channels are its
// mean colour instead, so a video depends on its image. Decode is a preview: the first
// three latent channels through a sigmoid, upsampled to the frame size, so a served job's
// video shows its latent. Rows are computed independently (Description.IndependentRows).
type Denoisers struct {
	// Model is the family's name and --model value ("synthetic").
	Model string
	// CondKey names the per-channel conditioning vector.
	CondKey string
	// New builds the denoiser from the simulator knobs (Options.Sim).
	New func(model.Config) (model.Denoiser, error)
	// CacheReuse, when > 0, says the model is a model.StepCacher with an adaptive rule
	// (modes fbcache and static) whose reusing call costs this fraction of a full one; its
	// state is the row's input and output residual, two latents.
	CacheReuse float64
	// StatedCost says a call costs exactly Sim's step time (Description.StatedCost).
	StatedCost bool
}

// Name implements Family.
func (d Denoisers) Name() string { return d.Model }

// Claims implements Family: no folder names a simulator.
func (Denoisers) Claims(string) bool { return false }

// NeedsDir implements Family.
func (Denoisers) NeedsDir() bool { return false }

// Knobs implements Family: the common knobs (the cache modes of a model with CacheReuse)
// and the per-frame guidance ramp Prepare draws (the simulators stand in for SVD's
// denoiser).
func (d Denoisers) Knobs() knob.Table {
	var modes []string
	if d.CacheReuse > 0 {
		modes = []string{pipeline.CacheFB, pipeline.CacheStatic}
	}
	return append(knob.Common(modes...),
		knob.Knob{Name: "min_guidance", Kind: knob.Float, Min: 0, Max: 100, AtMost: "max_guidance", Group: knob.Advanced,
			Help: "guidance weight of the first frame"},
		knob.Knob{Name: "max_guidance", OpenAIAlso: []string{"guidance_scale"}, Kind: knob.Float, Min: 0, Max: 100, Mesh: knob.Guides, Group: knob.Basic,
			Help: "guidance weight of the last frame; above 1 turns classifier-free guidance on"})
}

// Preflight implements Family: a simulator has no weights a file could replace.
func (d Denoisers) Preflight(_ string, o Options) error { return o.Weights.Check(d.Model) }

// Describe implements Family.
func (d Denoisers) Describe(string) (Description, error) {
	desc := Description{Defaults: (&denoiserSampler{}).DefaultParams(), SizeMultiple: simScale, IndependentRows: true, Image: NeedRequired,
		Schedulers: sched.KarrasSamplers, StatedCost: d.StatedCost}
	if d.CacheReuse > 0 {
		desc.Caching = Caching{Modes: []string{pipeline.CacheFB, pipeline.CacheStatic}}
	}
	return desc, nil
}

// CacheCost implements CacheCoster.
func (d Denoisers) CacheCost(_ string, _ pipeline.Cache, latent []int) (CacheCost, error) {
	return CacheCost{ReuseFraction: d.CacheReuse, StateBytes: 2 * 4 * int64(tensor.NumElements(latent))}, nil
}

// Open implements Family.
func (d Denoisers) Open(dir string, o Options) (Sampler, error) {
	if err := o.Weights.Check(d.Model); err != nil {
		return nil, err
	}
	cfg := o.Sim
	cfg.Name, cfg.Dir, cfg.Backend = d.Model, dir, o.Backend
	var den model.Denoiser
	if o.Roles.Denoise {
		var err error
		if d.New == nil {
			return nil, fmt.Errorf("family: %s has no denoiser constructor", d.Model)
		}
		if den, err = d.New(cfg); err != nil {
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

// DefaultParams are SVD's defaults at a 64x64 size, of the knobs the simulators read.
func (s *denoiserSampler) DefaultParams() Params {
	return Params{NumFrames: 14, Steps: 25, Height: 64, Width: 64, MinGuidance: 1, MaxGuidance: 3, FPS: 7}
}

// simScale is the simulators' latent downsampling factor (SVD's VAE's).
const simScale = 8

func (s *denoiserSampler) Validate(p Params) error {
	t := s.fam.Knobs()
	switch {
	case p.NumFrames < 1:
		return t.Errorf("num_frames", "{num_frames} %d: a video needs at least 1 frame", p.NumFrames)
	case p.Steps < 1:
		return t.Errorf("steps", "{steps} %d: a run needs at least 1 step", p.Steps)
	case p.Height < simScale || p.Width < simScale || p.Height%simScale != 0 || p.Width%simScale != 0:
		return t.Errorf("width", "{width} %d and {height} %d must be positive multiples of %d", p.Width, p.Height, simScale)
	case p.MinGuidance > p.MaxGuidance:
		return t.Errorf("min_guidance", "{min_guidance} %v is above {max_guidance} %v", p.MinGuidance, p.MaxGuidance)
	}
	return Description{Schedulers: sched.KarrasSamplers}.CheckScheduler(p.SchedulerChoice)
}

func (s *denoiserSampler) channels() int {
	if s.cfg.LatentChannels > 0 {
		return s.cfg.LatentChannels
	}
	return 4
}

func (s *denoiserSampler) LatentShape(p Params) []int {
	return []int{p.NumFrames, s.channels(), p.Height / simScale, p.Width / simScale}
}

// Scheduler is SVD's: the samplers of sched.KarrasSamplers on its Euler scheduler's schedule.
func (s *denoiserSampler) Scheduler(p Params) (sched.Scheduler, error) {
	return sched.NewKarrasNamed(p.Scheduler, sched.DefaultSVDConfig(), p.Steps)
}

func (s *denoiserSampler) Prepare(ctx context.Context, in Input, p Params, sc sched.Scheduler, samples []int64) (*pipeline.Item, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var colour []float32
	if in.Image != nil {
		colour = meanColour(in.Image)
	}
	shape := s.LatentShape(p)
	per := tensor.NumElements(shape)
	it := &pipeline.Item{Samples: samples, Latent: tensor.New(append([]int{len(samples)}, shape...)...)}
	it.SchedState = sched.InitialState(sc, p.Seed, samples)
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
		copy(vec.Data, colour)
		it.Cond = append(it.Cond, model.Conditioning{s.fam.CondKey: vec})
	}
	if p.Guided() {
		it.Guidance = sched.GuidanceWeights(float32(p.MinGuidance), float32(p.MaxGuidance), p.NumFrames)
	}
	return it, nil
}

// RandomConditioning implements RandomConditioner: the per-channel vector drawn from r,
// as Prepare draws it after the noise.
func (s *denoiserSampler) RandomConditioning(r *rand.Rand, latent []int) model.Conditioning {
	vec := tensor.New(latent[1])
	for i := range vec.Data {
		vec.Data[i] = float32(r.NormFloat64())
	}
	return model.Conditioning{s.fam.CondKey: vec}
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

// Decode is the simulators' preview decoder: frame f's colour channel c is the sigmoid of
// latent channel c (mod the channel count), each latent pixel a simScale×simScale block.
func (s *denoiserSampler) Decode(ctx context.Context, latent *tensor.Dense, p Params) (*tensor.Dense, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sh := latent.Shape
	if len(sh) == 5 && sh[0] == 1 {
		sh = sh[1:]
	}
	if len(sh) != 4 || sh[0] != p.NumFrames || sh[1] < 1 || sh[2]*simScale != p.Height || sh[3]*simScale != p.Width {
		return nil, fmt.Errorf("%w: %s: latent %v does not fit %d frames of %dx%d", ErrParams, s.fam.Model, latent.Shape, p.NumFrames, p.Width, p.Height)
	}
	t, c, lh, lw := sh[0], sh[1], sh[2], sh[3]
	out := tensor.New(t, 3, p.Height, p.Width)
	for f := range t {
		for ch := range 3 {
			src := latent.Data[(f*c+ch%c)*lh*lw:]
			dst := out.Data[(f*3+ch)*p.Height*p.Width:]
			for y := range p.Height {
				for x := range p.Width {
					v := float64(src[(y/simScale)*lw+x/simScale])
					dst[y*p.Width+x] = float32(1 / (1 + math.Exp(-v)))
				}
			}
		}
	}
	return out, nil
}

// meanColour is img's mean red, green and blue scaled to [-1, 1], summed in a fixed order.
func meanColour(img image.Image) []float32 {
	b := img.Bounds()
	var sum [3]float64
	n := 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			sum[0] += float64(r)
			sum[1] += float64(g)
			sum[2] += float64(bl)
			n++
		}
	}
	out := make([]float32, 3)
	for c := range out {
		if n > 0 {
			out[c] = float32(sum[c]/float64(n)/65535*2 - 1)
		}
	}
	return out
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
