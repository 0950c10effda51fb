package wan

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"

	"github.com/gomlx/gomlx/backends"

	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/model/checkpoint"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/model/wan/transformer"
	"github.com/vdpp/vdpp/model/wan/vae"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/sched"
	"github.com/vdpp/vdpp/tensor"
)

// FamilyName is the name Wan registers under in model/family.
const FamilyName = "wan"

// Defaults of WanPipeline.__call__ (diffusers v0.35.2).
const (
	DefaultHeight        = 480
	DefaultWidth         = 832
	DefaultNumFrames     = 81
	DefaultGuidanceScale = 5.0
	DefaultFPS           = 16
	// DefaultWindowOverlap is the frames neighbouring windows of a long video share: 5 of
	// a window's 21 latent frames.
	DefaultWindowOverlap = 20
)

// ErrInput marks generation inputs a Wan model cannot take (embeddings of the wrong
// width, missing negative embeddings for CFG).
var ErrInput = errors.New("wan: bad input")

func init() { family.Register(wanFamily{}) }

// wanFamily is Wan's family.Family.
type wanFamily struct{}

func (wanFamily) Name() string             { return FamilyName }
func (wanFamily) NeedsDir() bool           { return true }
func (wanFamily) Claims(class string) bool { return isWanClass(class) }

// Preflight implements family.Family: the folder's structure, the configs of every
// component o's roles load and their weights files, without reading weights.
func (wanFamily) Preflight(dir string, o family.Options) error {
	f, err := Open(dir)
	if err != nil {
		return err
	}
	if err := checkWeightOptions(f, o); err != nil {
		return err
	}
	sc, err := f.ReadSchedulerConfig()
	if err != nil {
		return err
	}
	spec, err := f.ImageSpec()
	if err != nil {
		return err
	}
	if o.Roles.Condition && o.Prompts {
		if err := f.CheckText(); err != nil {
			return err
		}
	}
	if o.Roles.Condition && spec.Image != family.NeedNone {
		if err := f.checkImageFiles(spec, o.Variant); err != nil {
			return err
		}
	}
	if o.Roles.Denoise {
		experts, err := f.expertsFor(sc, o.Roles)
		if err != nil {
			return err
		}
		for _, e := range experts {
			tdir, _ := f.TransformerDir(e)
			cfg, err := transformer.ReadConfig(tdir)
			if err != nil {
				return err
			}
			if to := transformerOptions(e, o); to.File != "" {
				// A file in another layout: check every tensor's name, shape and type now
				// (headers only), so that a bad file fails before any process starts.
				st, err := transformer.OpenWeights(tdir, cfg, to)
				if err != nil {
					return err
				}
				st.Close()
				continue
			}
			stem := transformer.WeightsStem
			if o.Variant != "" {
				stem += "." + o.Variant
			}
			if _, _, err := checkpoint.WeightsDirPath(tdir, stem); err != nil {
				return err
			}
		}
	}
	if o.Roles.Decode {
		if _, err := f.VAEConfig(); err != nil {
			return err
		}
		if err := f.checkVAEWeights(o.Variant); err != nil {
			return err
		}
	}
	return nil
}

// Describe implements family.Family: WanPipeline's defaults (81 frames at 832x480,
// 50 steps, guidance 5) as the folder's vdpp_sampling.json amends them, the size multiple
// of VAE factor x patch size, and the images a generation takes (ImageSpec: an
// image-to-video folder needs one, a first-last-frame one also a last image;
// expand_timesteps takes one optionally).
func (wanFamily) Describe(dir string) (family.Description, error) {
	f, err := Open(dir)
	if err != nil {
		return family.Description{}, err
	}
	spec, err := f.ImageSpec()
	if err != nil {
		return family.Description{}, err
	}
	defaults, err := f.DefaultParams()
	if err != nil {
		return family.Description{}, err
	}
	m, err := f.sizeMultiple()
	if err != nil {
		return family.Description{}, err
	}
	vc, err := f.VAEConfig()
	if err != nil {
		return family.Description{}, err
	}
	tc, err := f.TransformerConfig(1)
	if err != nil {
		return family.Description{}, err
	}
	sc, err := f.ReadSchedulerConfig()
	if err != nil {
		return family.Description{}, err
	}
	// A long video is cut into windows of the native 81 frames (21 latent frames) sharing
	// 20 frames (5 latent frames, a quarter), blended with a cosine ramp.
	return family.Description{Defaults: defaults, SizeMultiple: m, FrameMultiple: vc.TemporalFactor(),
		TextDim: tc.TextDim, TextDimFile: tc.Path, Image: spec.Image, LastImage: spec.LastImage,
		Windowing: family.Windowing{Window: DefaultNumFrames, Overlap: DefaultWindowOverlap, Blend: "cosine"},
		Caching:   Caching, Schedulers: sc.Samplers(), FlowShift: sc.FlowShift()}, nil
}

func defaultParams() family.Params {
	return family.Params{NumFrames: DefaultNumFrames, Steps: 50, Height: DefaultHeight, Width: DefaultWidth,
		GuidanceScale: DefaultGuidanceScale, FPS: DefaultFPS}
}

// DefaultParams returns WanPipeline's defaults with the sizes, frames, steps and guidance
// scale the folder's vdpp_sampling.json sets (checkpoint.Sampling; a small model's, such as
// the built-in Wan's) in place of the released checkpoints'.
func (f *Folder) DefaultParams() (family.Params, error) {
	smp, err := checkpoint.ReadSampling(f.Dir)
	if err != nil {
		return family.Params{}, err
	}
	return family.WithSampling(defaultParams(), smp), nil
}

// Open implements family.Family: the experts o's steps use, the VAE on the last stage.
func (wanFamily) Open(dir string, o family.Options) (family.Sampler, error) {
	if dir == "" {
		return nil, fmt.Errorf("wan: a model folder is required")
	}
	return Load(dir, o)
}

// VAEConfig reads vae/config.json.
func (f *Folder) VAEConfig() (vae.Config, error) {
	path := filepath.Join(f.ComponentDir(VAE), "config.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return vae.Config{}, fmt.Errorf("%s: %w: %w", path, ErrFolder, err)
	}
	return vae.ParseConfig(path, data)
}

// sizeMultiple is what height and width must be multiples of: the VAE's spatial factor
// times the transformer's patch.
func (f *Folder) sizeMultiple() (int, error) {
	vc, err := f.VAEConfig()
	if err != nil {
		return 0, err
	}
	tc, err := f.TransformerConfig(1)
	if err != nil {
		return 0, err
	}
	return vc.SpatialFactor() * lcm(tc.PatchSize[1], tc.PatchSize[2]), nil
}

func lcm(a, b int) int {
	g, x := a, b
	for x != 0 {
		g, x = x, g%x
	}
	return a / g * b
}

// ExpertRanges returns the steps each expert runs under sc: expert 1 (`transformer`)
// the steps whose timestep is >= the boundary, expert 2 the rest (WanPipeline compares in
// float32, as torch does a tensor with a Python float). Without a boundary expert 1 runs
// every step. An expert with no step has an empty range.
func (f *Folder) ExpertRanges(sc sched.Scheduler, numTrain int) [2]pipeline.Range {
	n := sc.NumSteps()
	b, ok := f.BoundaryTimestep(numTrain)
	if !ok {
		return [2]pipeline.Range{{Start: 0, End: n}, {Start: n, End: n}}
	}
	k := 0
	for k < n && sc.Timestep(k) >= float32(b) {
		k++
	}
	return [2]pipeline.Range{{Start: 0, End: k}, {Start: k, End: n}}
}

// expertsFor lists the experts (1, 2) whose steps meet r's: all of them when r sets no
// steps.
func (f *Folder) expertsFor(sc SchedulerConfig, r family.Roles) ([]int, error) {
	if r.TotalSteps == 0 || (r.Steps == pipeline.Range{}) || !f.HasBoundary {
		if f.HasBoundary {
			return []int{1, 2}, nil
		}
		return []int{1}, nil
	}
	s, err := sc.NewNamed(r.Schedule.Scheduler, r.Schedule.FlowShift, r.TotalSteps)
	if err != nil {
		return nil, err
	}
	var out []int
	for i, rg := range f.ExpertRanges(s, sc.NumTrainTimesteps()) {
		if rg.Start < r.Steps.End && r.Steps.Start < rg.End {
			out = append(out, i+1)
		}
	}
	return out, nil
}

// Sampler is Wan's family.Sampler: prompt embeddings and initial noise on the first stage,
// the experts of this process's steps with CFG (guidance_scale for the high-noise expert,
// guidance_scale_2 for the low-noise one) and the folder's flow scheduler on every stage,
// the denormalisation and causal VAE decode on the last.
type Sampler struct {
	Folder *Folder
	Sched  SchedulerConfig
	// TConfig is expert 1's config (text width, channels, patch); VConfig the VAE's.
	TConfig transformer.Config
	VConfig vae.Config
	// Experts holds the loaded experts (index 0: `transformer`, 1: `transformer_2`); nil
	// where this process runs none of that expert's steps.
	Experts [2]*transformer.Model
	VAE     *vae.VAE
	// Text is the tokenizer and text encoder (first stage, with family.Options.Prompts);
	// nil where this process encodes no prompt.
	Text *PromptEncoder
	// Spec is what the folder's image conditioning needs; Images is the image conditioner
	// (first stage of a folder that takes an image), nil elsewhere.
	Spec   ImageSpec
	Images *ImageEncoding

	// simpleGo says the networks run on the pure-Go backend (im2col convolutions, its
	// attention score budget), for the memory estimate.
	simpleGo bool
	// defaults are the folder's DefaultParams.
	defaults family.Params
	// backend is what the networks run on (nil when none is loaded).
	backend backends.Backend
}

var (
	_ family.Sampler           = (*Sampler)(nil)
	_ family.RandomConditioner = (*Sampler)(nil)
)

// Load opens the Wan folder dir and loads what o's roles need: the experts whose steps
// meet o.Roles.Steps, the VAE for decoding, the tokenizer and text encoder for
// conditioning on prompts (o.Prompts).
func Load(dir string, o family.Options) (*Sampler, error) {
	var b backends.Backend
	if o.Roles.Denoise || o.Roles.Decode || (o.Roles.Condition && (o.Prompts || takesImage(dir))) {
		var err error
		if b, err = nn.NewBackend(o.Backend); err != nil {
			return nil, err
		}
	}
	return LoadOn(dir, o, b)
}

// takesImage reports whether the folder dir takes an image (its conditioner loads networks
// without prompts); a folder that cannot be read says no, and LoadOn reports why.
func takesImage(dir string) bool {
	f, err := Open(dir)
	return err == nil && f.Variant() != TextToVideo
}

// LoadOn is Load onto backend b (o.Backend is ignored); b may be nil when o loads no
// network.
func LoadOn(dir string, o family.Options, b backends.Backend) (s *Sampler, err error) {
	f, err := Open(dir)
	if err != nil {
		return nil, err
	}
	if err := checkWeightOptions(f, o); err != nil {
		return nil, err
	}
	s = &Sampler{Folder: f, simpleGo: b != nil && nn.IsSimpleGo(b), backend: b}
	if s.Spec, err = f.ImageSpec(); err != nil {
		return nil, err
	}
	if s.defaults, err = f.DefaultParams(); err != nil {
		return nil, err
	}
	if s.Sched, err = f.ReadSchedulerConfig(); err != nil {
		return nil, err
	}
	if s.TConfig, err = f.TransformerConfig(1); err != nil {
		return nil, err
	}
	if s.VConfig, err = f.VAEConfig(); err != nil {
		return nil, err
	}
	text := o.Roles.Condition && o.Prompts
	images := o.Roles.Condition && s.Spec.Image != family.NeedNone
	if !o.Roles.Denoise && !o.Roles.Decode && !text && !images {
		return s, nil
	}
	if b == nil {
		return nil, fmt.Errorf("wan: no backend to load the networks on")
	}
	defer func() {
		if err != nil {
			s.Close()
			s = nil
		}
	}()
	if o.Roles.Denoise {
		experts, err := f.expertsFor(s.Sched, o.Roles)
		if err != nil {
			return nil, err
		}
		if len(o.LoRAs.LoRA2) > 0 && !f.HasBoundary {
			return nil, fmt.Errorf("%w: lora_2 (--lora-2) needs a two-expert model (model_index.json boundary_ratio)", family.ErrParams)
		}
		for _, e := range experts {
			set, err := f.loraSet(e, o.LoRAs, o.LoRADir)
			if err != nil {
				return nil, err
			}
			to := transformerOptions(e, o)
			to.Deltas = nnDeltas(set)
			if s.Experts[e-1], err = f.LoadTransformerWith(e, to, b); err != nil {
				return nil, err
			}
		}
	}
	if o.Roles.Decode {
		if s.VAE, err = vae.Load(f.ComponentDir(VAE), o.Variant, b); err != nil {
			return nil, err
		}
	}
	if images {
		if s.Images, err = f.loadImageEncoding(s.Spec, o.Variant, b, s.VAE); err != nil {
			return nil, err
		}
	}
	if text {
		var progress func(loaded, total int64)
		if o.Progress != nil {
			progress = func(loaded, total int64) { o.Progress(TextEncoder, loaded, total) }
		}
		if s.Text, err = f.LoadPromptEncoder(b, progress); err != nil {
			return nil, err
		}
		if w := s.Text.Width(); w != s.TConfig.TextDim {
			return nil, fmt.Errorf("%w: %s: the text encoder's d_model is %d, the transformer's text_dim is %d (%s)", ErrFolder, f.ComponentDir(TextEncoder), w, s.TConfig.TextDim, s.TConfig.Path)
		}
	}
	return s, nil
}

// Family implements family.Sampler.
func (s *Sampler) Family() string { return FamilyName }

// DefaultParams implements family.Sampler: WanPipeline's defaults as the folder's
// vdpp_sampling.json amends them (Folder.DefaultParams).
func (s *Sampler) DefaultParams() family.Params { return s.defaults }

// Validate implements family.Sampler: frames 1 + 4k (the causal VAE's temporal factor),
// height and width positive multiples of VAE factor x patch, finite guidance >= 0.
func (s *Sampler) Validate(p family.Params) error {
	tf := s.VConfig.TemporalFactor()
	m := s.VConfig.SpatialFactor() * lcm(s.TConfig.PatchSize[1], s.TConfig.PatchSize[2])
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0 }
	switch {
	case p.NumFrames < 1 || (p.NumFrames-1)%tf != 0:
		return Knobs.Errorf("num_frames", "{num_frames} %d: the model's causal VAE takes 1 + %dk frames (e.g. %d or %d)", p.NumFrames, tf, max(1, (p.NumFrames-1)/tf*tf+1), (max(p.NumFrames-1, 0)/tf+1)*tf+1)
	case p.Height < m || p.Width < m || p.Height%m != 0 || p.Width%m != 0:
		return Knobs.Errorf("width", "{width} %d and {height} %d must be positive multiples of %d (the VAE's factor times the patch)", p.Width, p.Height, m)
	case p.Steps < 1:
		return Knobs.Errorf("steps", "{steps} %d: a run needs at least 1 step", p.Steps)
	case !finite(p.GuidanceScale):
		return Knobs.Errorf("guidance_scale", "{guidance_scale} %v must be finite and >= 0", p.GuidanceScale)
	case !finite(p.GuidanceScale2):
		return Knobs.Errorf("guidance_scale_2", "{guidance_scale_2} %v must be finite and >= 0", p.GuidanceScale2)
	case p.GuidanceScale2 != 0 && !s.Folder.HasBoundary:
		return Knobs.Errorf("guidance_scale_2", "{guidance_scale_2} needs a two-expert model (model_index.json boundary_ratio)")
	}
	return s.describeSchedulers().CheckScheduler(p.SchedulerChoice)
}

// describeSchedulers is the scheduler part of the folder's Description.
func (s *Sampler) describeSchedulers() family.Description {
	return family.Description{Schedulers: s.Sched.Samplers(), FlowShift: s.Sched.FlowShift()}
}

// LatentShape implements family.Sampler: [1 + (F-1)/4, z_dim, H/8, W/8] (the VAE's factors).
func (s *Sampler) LatentShape(p family.Params) []int {
	sf := s.VConfig.SpatialFactor()
	return []int{s.VConfig.LatentFrames(p.NumFrames), s.VConfig.ZDim, p.Height / sf, p.Width / sf}
}

// Scheduler implements family.Sampler: the sampler p.Scheduler names (the folder's own
// by default) with p.FlowShift (SchedulerConfig.NewNamed).
func (s *Sampler) Scheduler(p family.Params) (sched.Scheduler, error) {
	return s.Sched.NewNamed(p.Scheduler, p.FlowShift, p.Steps)
}

// Guided reports whether p runs CFG: WanPipeline's guidance_scale > 1.
func Guided(p family.Params) bool { return p.GuidanceScale > 1 }

// GuidanceWeights returns an item's guidance weights for a latent of frames frames: one
// row of frames copies of guidance_scale, and with two experts a second row of
// guidance_scale_2 (guidance_scale where it is 0), which the low-noise expert's steps use.
func (s *Sampler) GuidanceWeights(p family.Params, frames int) []float32 {
	if !Guided(p) {
		return nil
	}
	g := []float64{p.GuidanceScale}
	if s.Folder.HasBoundary {
		g2 := p.GuidanceScale2
		if g2 == 0 {
			g2 = p.GuidanceScale
		}
		g = append(g, g2)
	}
	out := make([]float32, 0, len(g)*frames)
	for _, v := range g {
		for range frames {
			out = append(out, float32(v))
		}
	}
	return out
}

// Conditioning returns a sample's conditioning: the prompt (and, when guided, the negative
// prompt) encoded by the text encoder (cached: a text is encoded once), or the given prompt
// embeddings checked against the transformer's text width.
func (s *Sampler) Conditioning(in family.Input, guided bool) (model.Conditioning, error) {
	if in.Prompt != nil {
		if in.PromptEmbeds != nil || in.NegativePromptEmbeds != nil {
			return nil, fmt.Errorf("%w: a prompt and prompt embeddings: give one", ErrInput)
		}
		if s.Text == nil {
			return nil, fmt.Errorf("%w: a prompt, but this process did not load the text encoder (family.Options.Prompts)", ErrInput)
		}
		var err error
		if in.PromptEmbeds, err = s.Text.Embeds(in.Prompt.Text); err != nil {
			return nil, err
		}
		if guided {
			if in.NegativePromptEmbeds, err = s.Text.Embeds(in.Prompt.Negative); err != nil {
				return nil, err
			}
		}
	}
	c := model.Conditioning{}
	put := func(key, what string, e *tensor.Dense) error {
		if e == nil {
			return fmt.Errorf("%w: no %s", ErrInput, what)
		}
		sh := e.Shape
		if !(len(sh) == 2 || (len(sh) == 3 && sh[0] == 1)) || sh[len(sh)-2] < 1 {
			return fmt.Errorf("%w: %s %v: want [L, %d] or [1, L, %d]", ErrInput, what, sh, s.TConfig.TextDim, s.TConfig.TextDim)
		}
		if w := sh[len(sh)-1]; w != s.TConfig.TextDim {
			return fmt.Errorf("%w: %s %v are %d wide; the transformer's text_dim is %d (%s)", ErrInput, what, sh, w, s.TConfig.TextDim, s.TConfig.Path)
		}
		if l := sh[len(sh)-2]; s.TConfig.HasImage() && l != transformer.TextContextLen {
			return fmt.Errorf("%w: %s %v have %d rows; a transformer with the image branch (%s) takes exactly %d (diffusers splits [image | text] at L − %d): pad them with zero rows as the text encoder's output is padded",
				ErrInput, what, sh, l, s.TConfig.Path, transformer.TextContextLen, transformer.TextContextLen)
		}
		c[key] = &tensor.Dense{Shape: sh[len(sh)-2:], Data: e.Data}
		return nil
	}
	if err := put(KeyPromptEmbeds, "prompt embeddings", in.PromptEmbeds); err != nil {
		return nil, err
	}
	if guided {
		if err := put(KeyNegativeEmbeds, "negative prompt embeddings (guidance_scale > 1 needs them)", in.NegativePromptEmbeds); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// ImageConditioning returns a sample's image conditioning (ImageEncoding.Encode) for in's
// images at p's size and length, or nil when there is none: the folder takes no image (and
// in has none), or takes one optionally and in has none. A missing or unwanted image is an
// error wrapping ErrInput.
func (s *Sampler) ImageConditioning(ctx context.Context, in family.Input, p family.Params) (*ImageConditioned, error) {
	switch {
	case s.Spec.Image == family.NeedNone && (in.Image != nil || in.LastImage != nil):
		return nil, fmt.Errorf("%w: an image: %w", ErrInput, errNoImageModel)
	case s.Spec.Image == family.NeedNone:
		return nil, nil
	case in.Image == nil && in.LastImage != nil:
		return nil, fmt.Errorf("%w: a last image without the (first) image", ErrInput)
	case in.Image == nil && s.Spec.Image == family.NeedOptional:
		return nil, nil
	case in.Image == nil:
		return nil, fmt.Errorf("%w: no image: the model is image-to-video (%s)", ErrInput, filepath.Join(s.Folder.Dir, checkpoint.IndexFile))
	case s.Images == nil:
		return nil, fmt.Errorf("%w: an image, but this process did not load the image conditioner (the Condition role)", ErrInput)
	}
	c, err := s.Images.Encode(ctx, in.Image, in.LastImage, p.NumFrames, p.Height, p.Width)
	if err != nil {
		return nil, err
	}
	return &c, nil
}

// Noise returns sample's initial noise in the engine's layout [T, C, h, w]: N(0, 1) drawn
// in diffusers' order [C, T, h, w] from the stream keyed by (p.Seed, sample).
func (s *Sampler) Noise(p family.Params, sample int64) *tensor.Dense {
	sh := s.LatentShape(p)
	r := rand.New(rand.NewPCG(uint64(p.Seed), uint64(sample)))
	x := tensor.New(1, sh[1], sh[0], sh[2], sh[3])
	for i := range x.Data {
		x.Data[i] = float32(r.NormFloat64())
	}
	out := SwapTC(x)
	return &tensor.Dense{Shape: sh, Data: out.Data}
}

// Prepare implements family.Sampler: each sample's noise (Noise) times init_noise_sigma,
// the prompt embeddings and the image conditioning (ImageConditioning) as conditioning
// and, when guided, the guidance weights.
func (s *Sampler) Prepare(ctx context.Context, in family.Input, p family.Params, sc sched.Scheduler, samples []int64) (*pipeline.Item, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.Validate(p); err != nil {
		return nil, err
	}
	if sc.NumSteps() != p.Steps {
		return nil, fmt.Errorf("wan: prepare: a schedule of %d steps for %d", sc.NumSteps(), p.Steps)
	}
	cond, err := s.Conditioning(in, Guided(p))
	if err != nil {
		return nil, err
	}
	ic, err := s.ImageConditioning(ctx, in, p)
	if err != nil {
		return nil, err
	}
	if ic != nil {
		maps.Copy(cond, ic.Cond())
	}
	shape := s.LatentShape(p)
	per := tensor.NumElements(shape)
	it := &pipeline.Item{Samples: samples, Latent: tensor.New(append([]int{len(samples)}, shape...)...),
		Guidance: s.GuidanceWeights(p, shape[0]), SchedState: sched.InitialState(sc, p.Seed, samples)}
	sigma := sc.InitSigma()
	for r, sample := range samples {
		dst := it.Latent.Data[r*per : (r+1)*per]
		for i, v := range s.Noise(p, sample).Data {
			dst[i] = v * sigma
		}
		it.Cond = append(it.Cond, cond)
	}
	return it, nil
}

// Stepper implements family.Sampler: an expert per step range (the loaded ones only), each
// with its guidance row.
func (s *Sampler) Stepper(sc sched.Scheduler) (*pipeline.Stepper, error) {
	st := &pipeline.Stepper{Sched: sc}
	if sc == nil {
		// No schedule, so no step ranges (a caller that only wants a denoiser, as the
		// planner's calibration): the first loaded expert for every step.
		for _, m := range s.Experts {
			if m != nil {
				st.Model = &Denoiser{M: m, ExpandTimesteps: s.Folder.ExpandTimesteps}
				return st, nil
			}
		}
		return nil, fmt.Errorf("wan: this process loaded no transformer")
	}
	ranges := s.Folder.ExpertRanges(sc, s.Sched.NumTrainTimesteps())
	for i, m := range s.Experts {
		if m == nil || ranges[i].Start == ranges[i].End {
			continue
		}
		st.Experts = append(st.Experts, pipeline.Expert{Steps: ranges[i], Model: &Denoiser{M: m, ExpandTimesteps: s.Folder.ExpandTimesteps}, GuidanceRow: i, ID: i + 1})
	}
	if len(st.Experts) == 0 {
		return nil, fmt.Errorf("wan: this process loaded no transformer")
	}
	return st, nil
}

// Decode implements family.Sampler: latents_std/mean denormalisation, the causal VAE
// decode, and (video/2 + 0.5) clamped to [0, 1], as frames [F, 3, H, W].
func (s *Sampler) Decode(ctx context.Context, latent *tensor.Dense, p family.Params) (*tensor.Dense, error) {
	z, err := s.decodeInput(ctx, latent, p)
	if err != nil {
		return nil, err
	}
	v, err := s.VAE.Decode(z)
	if err != nil {
		return nil, err
	}
	return toUnitFrames(v), nil
}

var _ family.ChunkDecoder = (*Sampler)(nil)

// DecodeChunks implements family.ChunkDecoder: Decode's frames one latent frame at a time
// (the first video frame, then 4 at a time for Wan 2.x's causal VAE), through the VAE's
// streamed decode (vae.VAE.DecodeStream, tiled or not as the VAE is), so only one latent
// frame's activations, caches and frames are held besides the latent.
func (s *Sampler) DecodeChunks(ctx context.Context, latent *tensor.Dense, p family.Params, emit func(first int, frames *tensor.Dense) error) error {
	z, err := s.decodeInput(ctx, latent, p)
	if err != nil {
		return err
	}
	first := 0
	return s.VAE.DecodeStream(z, func(v *tensor.Dense) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		frames := toUnitFrames(v)
		if err := emit(first, frames); err != nil {
			return err
		}
		first += frames.Shape[0]
		return nil
	})
}

// decodeInput checks that latent is p's final latent [F, C, h, w] (or [1, F, C, h, w]) and
// returns it denormalised in the VAE's layout [1, C, F, h, w].
func (s *Sampler) decodeInput(ctx context.Context, latent *tensor.Dense, p family.Params) (*tensor.Dense, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.VAE == nil {
		return nil, fmt.Errorf("wan: this process did not load the VAE")
	}
	want := s.LatentShape(p)
	got := latent.Shape
	if len(got) == 5 && got[0] == 1 {
		got = got[1:]
	}
	if !slices.Equal(got, want) {
		return nil, fmt.Errorf("wan: decode: latent %v, want %v for %d frames of %dx%d", latent.Shape, want, p.NumFrames, p.Width, p.Height)
	}
	z := SwapTC(&tensor.Dense{Shape: append([]int{1}, want...), Data: latent.Data})
	return s.VConfig.Denormalize(z)
}

// toUnitFrames maps the VAE's video [1, 3, n, H, W] in [-1, 1] to frames [n, 3, H, W] in
// [0, 1] (video/2 + 0.5, clamped), as WanPipeline's postprocessing does.
func toUnitFrames(v *tensor.Dense) *tensor.Dense {
	out := SwapTC(v) // [1, n, 3, H, W]
	for i, x := range out.Data {
		out.Data[i] = min(max(x*0.5+0.5, 0), 1)
	}
	out.Shape = out.Shape[1:]
	return out
}

// Kernels implements family.KernelReporter: the kernels the networks run with.
func (s *Sampler) Kernels() string {
	if s.backend == nil {
		return ""
	}
	return nn.DescribeKernels(s.backend)
}

// WeightBytes implements family.Sampler: per loaded component.
func (s *Sampler) WeightBytes() map[string]int64 {
	out := map[string]int64{}
	for i, m := range s.Experts {
		if m != nil {
			out[[]string{Transformer, Transformer2}[i]] = m.WeightBytes()
		}
	}
	if s.VAE != nil {
		out[VAE] = s.VAE.WeightBytes()
	}
	if s.Text != nil {
		out[TextEncoder] = s.Text.WeightBytes()
	}
	if s.Images != nil {
		if s.Images.CLIP != nil {
			out[ImageEncoder] = s.Images.CLIP.WeightBytes()
		}
		out[VAE] = s.Images.VAE.WeightBytes()
	}
	return out
}

// WeightTypes implements family.TypedWeights: the experts as held (nn.NewWeightsHeld), the
// other networks in float32.
func (s *Sampler) WeightTypes() map[string]int64 {
	out := map[string]int64{}
	experts := map[string]bool{}
	for i, m := range s.Experts {
		if m != nil {
			experts[[]string{Transformer, Transformer2}[i]] = true
			for t, n := range m.HeldBytes() {
				out[t.String()] += n
			}
		}
	}
	for c, n := range s.WeightBytes() {
		if !experts[c] {
			out["f32"] += n
		}
	}
	return out
}

// ReleaseDenoiser implements family.DenoiserReleaser: it releases the experts (their
// weights' buffers are freed at once, transformer.Model.Release, though the stepper still
// refers to them); the VAE and the encoders stay.
func (s *Sampler) ReleaseDenoiser() error {
	var errs []error
	for i, m := range s.Experts {
		if m != nil {
			errs = append(errs, m.Release())
			s.Experts[i] = nil
		}
	}
	return errors.Join(errs...)
}

var _ family.DenoiserReleaser = (*Sampler)(nil)

// Close implements family.Sampler.
func (s *Sampler) Close() error {
	var errs []error
	for i, m := range s.Experts {
		if m != nil {
			errs = append(errs, m.Close())
			s.Experts[i] = nil
		}
	}
	if s.Text != nil {
		errs = append(errs, s.Text.Close())
		s.Text = nil
	}
	if s.Images != nil {
		errs = append(errs, s.Images.Close())
		if s.Images.VAE != s.VAE {
			errs = append(errs, s.Images.VAE.Close())
		}
		s.Images = nil
	}
	if s.VAE != nil {
		errs = append(errs, s.VAE.Close())
		s.VAE = nil
	}
	return errors.Join(errs...)
}

// RandomConditioning implements family.RandomConditioner: prompt and negative embeddings
// of transformer.TextContextLen rows (the UMT5 length WanPipeline pads to) and, for a
// folder that takes an image, an image condition of the latent's shape (and image
// embeddings of the image encoder's shape), for benchmarking the experts without the
// conditioners.
func (s *Sampler) RandomConditioning(r *rand.Rand, latent []int) model.Conditioning {
	draw := func(shape ...int) *tensor.Dense {
		t := tensor.New(shape...)
		for i := range t.Data {
			t.Data[i] = float32(r.NormFloat64())
		}
		return t
	}
	c := model.Conditioning{KeyPromptEmbeds: draw(transformer.TextContextLen, s.TConfig.TextDim),
		KeyNegativeEmbeds: draw(transformer.TextContextLen, s.TConfig.TextDim)}
	if len(latent) != 4 {
		return c
	}
	switch s.Spec.Variant {
	case ImageToVideo:
		c[KeyCondition] = draw(s.Spec.TemporalFactor+s.Spec.ZDim, latent[0], latent[2], latent[3])
		if s.Spec.Encoder {
			k := 1
			if s.Spec.LastImage == family.NeedRequired {
				k = 2
			}
			c[KeyImageEmbeds] = draw(k, s.Spec.CLIP.NumPositions(), s.Spec.CLIP.HiddenSize)
		}
	case TextImageToVideo:
		c[KeyCondition] = draw(s.Spec.ZDim, 1, latent[2], latent[3])
	}
	return c
}

// Switches implements family.Switcher: the first step of the low-noise expert when both
// experts run steps of a run of steps steps.
func (wanFamily) Switches(dir string, steps int) ([]int, error) {
	f, err := Open(dir)
	if err != nil {
		return nil, err
	}
	sc, err := f.ReadSchedulerConfig()
	if err != nil {
		return nil, err
	}
	s, err := sc.New(steps)
	if err != nil {
		return nil, err
	}
	r := f.ExpertRanges(s, sc.NumTrainTimesteps())
	if r[0].Len() == 0 || r[1].Len() == 0 {
		return nil, nil
	}
	return []int{r[1].Start}, nil
}

var _ family.Switcher = wanFamily{}

// transformerOptions are the load options of expert from a family's options: the folder's
// variant, or the file --transformer / --transformer-2 names.
func transformerOptions(expert int, o family.Options) transformer.LoadOptions {
	hold, _ := nn.HoldFor(o.Weights.DType) // checked by checkWeightOptions
	return transformer.LoadOptions{Variant: o.Variant, File: o.Weights.File(ExpertComponent(expert)), Hold: transformer.Hold(hold)}
}

// checkWeightOptions refuses weight options the folder cannot take: --transformer-2 for a
// folder with one expert, --unet, a --weights-dtype that is not a weight type.
func checkWeightOptions(f *Folder, o family.Options) error {
	has := []string{Transformer}
	if f.HasBoundary {
		has = append(has, Transformer2)
	}
	return o.Weights.Check(FamilyName, has...)
}
