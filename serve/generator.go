package serve

import (
	"context"
	"errors"
	"fmt"
	"image"
	"sort"
	"sync"

	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/model/checkpoint"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/svd"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/sched"
	"github.com/vdpp/vdpp/tensor"
)

// ErrNoGenerator is returned for a model that has no Generator (no conditioning or decoder
// is wired for it yet).
var ErrNoGenerator = errors.New("serve: no generator for model")

// Sample is the state of one job at step 0: what the first stage starts from.
type Sample struct {
	// Latent is [1, T, C, H, W], already multiplied by init_noise_sigma.
	Latent *tensor.Dense
	// Cond is the sample's conditioning (computed once, handed along with the latent).
	Cond model.Conditioning
	// Guidance holds per-frame CFG weights [T], or nil for an unguided job.
	Guidance []float32
	// Windows, when set, steps a video longer than the model's native length as
	// overlapping temporal windows (in latent frames; see family.Description.Windows).
	Windows *pipeline.Windows
}

// Generator is the model-specific edge of the server: it turns a request into the initial
// Sample and a final latent into frames. The server, queue and workers never look inside;
// the real SVD path (CLIP image embedding, VAE encode, VAE decode) plugs in here.
type Generator interface {
	// Prepare builds the initial sample for img and p. It must be deterministic in
	// (img, p) (p.Seed seeds the noise).
	Prepare(ctx context.Context, img image.Image, p Params, sc sched.Scheduler) (*Sample, error)
	// Decode turns a final latent [1, T, C, H, W] into frames [T, 3, p.Height, p.Width]
	// with values in [0, 1].
	Decode(ctx context.Context, latent *tensor.Dense, p Params) (*tensor.Dense, error)
}

// PromptGenerator is implemented by Generators of text-to-video models (Wan): a job gives
// a prompt and a negative prompt instead of an image.
type PromptGenerator interface {
	// TextConditioned reports whether the model is conditioned on prompts (then jobs give
	// a prompt and no image).
	TextConditioned() bool
	// PreparePrompt builds the initial sample for pr and p, deterministic in (pr, p).
	PreparePrompt(ctx context.Context, pr family.Prompt, p Params, sc sched.Scheduler) (*Sample, error)
}

// textConditioned reports whether gen takes prompts instead of images.
func textConditioned(gen Generator) bool {
	pg, ok := gen.(PromptGenerator)
	return ok && pg.TextConditioned()
}

// ModelSpec names the model every process of a server loads: the coordinator builds the
// Generator from it, each worker the Denoiser.
type ModelSpec struct {
	// Name is "synthetic" or "svd" (then Dir is the checkpoint folder; `--model builtin`
	// and `--model DIR` both resolve to "svd" with a folder).
	Name string
	Dir  string
	// Variant is the checkpoint's weights variant ("" for fp32, "fp16"); Backend the GoMLX
	// backend spec ("" for the default). Both only matter to checkpoint models.
	Variant, Backend string
	// DecodeChunkSize is the decode_chunk_size a job gets when its JSON leaves it out
	// (0: all frames at once); the built-in model's decoder was trained on 7-frame chunks.
	DecodeChunkSize int
	// MinGuidance and MaxGuidance are the guidance weights of the first and last frame a
	// job gets when its JSON leaves them out; both 0 means the checkpoint's (SVD's 1 and 3).
	MinGuidance, MaxGuidance float64
	StepMS                   float64
	Cost                     string
	// LoadProgress, when not nil, is told as a large component loads (the text encoder).
	LoadProgress func(component string, loaded, total int64) `json:"-"`
}

// DenoiserConfig is the model.Config a worker builds its Denoiser from.
func (m ModelSpec) DenoiserConfig() model.Config {
	return model.Config{Name: m.Name, Dir: m.Dir, Variant: m.Variant, Backend: m.Backend, StepMS: m.StepMS, Cost: m.Cost, LatentChannels: 4}
}

// SchedConfig is the scheduler configuration of the model: the checkpoint's
// scheduler/scheduler_config.json when the spec names a folder, SVD's defaults otherwise.
// Coordinator and workers read the same file, so they build the same schedule.
func (m ModelSpec) SchedConfig() (sched.Config, error) {
	if m.Dir == "" {
		return sched.DefaultSVDConfig(), nil
	}
	ck, err := checkpoint.Open(m.Dir)
	if err != nil {
		return sched.Config{}, fmt.Errorf("serve: scheduler of %s: %w", m.Dir, err)
	}
	path, err := ck.ConfigPath(svd.Scheduler)
	if err != nil {
		return sched.Config{}, fmt.Errorf("serve: scheduler of %s: %w", m.Dir, err)
	}
	cfg, err := sched.LoadConfig(path)
	if err != nil {
		return sched.Config{}, fmt.Errorf("serve: scheduler of %s: %w", m.Dir, err)
	}
	return cfg, nil
}

// DefaultMaxBatch is the --max-batch used when none is given: 4 for the simulator models,
// whose batch rows are computed independently, and 1 for every other model (the SVD UNet's
// rows are not guaranteed bit-independent of the batch they share, see Reference).
func (m ModelSpec) DefaultMaxBatch() int {
	switch m.Name {
	case "synthetic", "dummy":
		return 4
	}
	return 1
}

// ParamsModel is implemented by Generators whose model has its own defaults and limits
// (a checkpoint's frame count, its VAE's downsampling factor). The server parses a job's
// JSON over DefaultParams and refuses, with a 400, what CheckParams refuses.
type ParamsModel interface {
	// DefaultParams are the parameters of a job whose JSON leaves them out.
	DefaultParams() Params
	// CheckParams returns an error wrapping ErrBadParams (or ErrTooLarge) for parameters
	// the model cannot run; p has already passed Params.Validate.
	CheckParams(p Params) error
}

// ParseJobParams parses a job's JSON parameters for gen: over gen's defaults when it is a
// ParamsModel (DefaultParams otherwise), validated against lim and then by the model.
//
// A video longer than the model's native length is cut into temporal windows: window,
// overlap and blend are resolved against the model's Description (WindowedModel; the
// defaults' frame count otherwise) and refused with one ErrBadParams line when the model
// cannot run them. A job of one window keeps them zero.
func ParseJobParams(gen Generator, data []byte, lim Limits) (Params, error) {
	pm, ok := gen.(ParamsModel)
	base := DefaultParams()
	if ok {
		base = pm.DefaultParams()
	}
	p, err := ParseParamsOver(data, base, lim)
	if err != nil {
		return Params{}, err
	}
	if ok {
		if err := pm.CheckParams(p); err != nil {
			return Params{}, err
		}
	}
	return resolveWindows(gen, p, data)
}

// GeneratorFactory builds a Generator for a model.
type GeneratorFactory func(ModelSpec) (Generator, error)

var (
	genMu       sync.RWMutex
	genRegistry = map[string]GeneratorFactory{}
)

// RegisterGenerator makes a Generator available for model name. It panics on a duplicate.
func RegisterGenerator(name string, f GeneratorFactory) {
	genMu.Lock()
	defer genMu.Unlock()
	if _, dup := genRegistry[name]; dup {
		panic("serve: RegisterGenerator called twice for " + name)
	}
	genRegistry[name] = f
}

// NewGenerator builds the Generator registered for spec.Name, or the FamilyGenerator of a
// model family that loads from a folder.
func NewGenerator(spec ModelSpec) (Generator, error) {
	genMu.RLock()
	f, ok := genRegistry[spec.Name]
	genMu.RUnlock()
	if fam, isFamily := family.Lookup(spec.Name); !ok && isFamily && fam.NeedsDir() {
		return OpenFamily(spec)
	}
	if !ok {
		genMu.RLock()
		names := make([]string, 0, len(genRegistry))
		for n := range genRegistry {
			names = append(names, n)
		}
		genMu.RUnlock()
		sort.Strings(names)
		return nil, fmt.Errorf("%w %q (have: %v)", ErrNoGenerator, spec.Name, names)
	}
	return f(spec)
}

func init() {
	RegisterGenerator("synthetic", func(ModelSpec) (Generator, error) { return Synthetic{}, nil })
}

// NewScheduler returns the scheduler of spec for steps steps: the family's (read from its
// folder without loading weights) for a registered family, SVD's Euler otherwise.
func NewScheduler(spec ModelSpec, steps int) (sched.Scheduler, error) {
	if f, ok := family.Lookup(spec.Name); ok {
		s, err := f.Open(spec.Dir, family.Options{Variant: spec.Variant, Backend: spec.Backend, Sim: spec.DenoiserConfig()})
		if err != nil {
			return nil, fmt.Errorf("serve: scheduler: %w", err)
		}
		defer s.Close()
		sc, err := s.Scheduler(steps)
		if err != nil {
			return nil, fmt.Errorf("serve: scheduler for %d steps: %w", steps, err)
		}
		return sc, nil
	}
	cfg, err := spec.SchedConfig()
	if err != nil {
		return nil, err
	}
	sc, err := sched.New(cfg, steps)
	if err != nil {
		return nil, fmt.Errorf("serve: scheduler for %d steps: %w", steps, err)
	}
	return sc, nil
}

// Reference runs a job the way one process would: Prepare, then every step with one
// Stepper on a batch of one. Its result is what the server's output must equal, bit for bit.
// With den nil the steps run on the denoising role of spec's family, as the workers do.
func Reference(ctx context.Context, gen Generator, den model.Denoiser, spec ModelSpec, img image.Image, p Params) (*tensor.Dense, error) {
	var st *pipeline.Stepper
	var sc sched.Scheduler
	if f, ok := family.Lookup(spec.Name); ok && den == nil {
		smp, err := f.Open(spec.Dir, family.Options{Variant: spec.Variant, Backend: spec.Backend,
			Roles: family.Roles{Denoise: true}, Sim: spec.DenoiserConfig()})
		if err != nil {
			return nil, err
		}
		defer smp.Close()
		if sc, err = smp.Scheduler(p.Steps); err != nil {
			return nil, err
		}
		if st, err = smp.Stepper(sc); err != nil {
			return nil, err
		}
	} else {
		var err error
		if sc, err = NewScheduler(spec, p.Steps); err != nil {
			return nil, err
		}
		st = &pipeline.Stepper{Model: den, Sched: sc}
	}
	s, err := gen.Prepare(ctx, img, p, sc)
	if err != nil {
		return nil, err
	}
	it := &pipeline.Item{Samples: []int64{0}, Latent: s.Latent.Clone(), Cond: []model.Conditioning{s.Cond}, Guidance: s.Guidance, Windows: s.Windows}
	for it.Step = 0; it.Step < p.Steps; it.Step++ {
		if err := st.Step(ctx, it); err != nil {
			return nil, fmt.Errorf("serve: reference step %d: %w", it.Step, err)
		}
	}
	return it.Latent, nil
}
