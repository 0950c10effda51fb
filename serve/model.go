package serve

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/knob"
	"github.com/vdpp/vdpp/model/lora"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/plan"
	"github.com/vdpp/vdpp/sched"
	"github.com/vdpp/vdpp/serve/dispatch"
	"github.com/vdpp/vdpp/serve/job"
	"github.com/vdpp/vdpp/tensor"
)

// ErrModelClosed is returned by a Model used after Close.
var ErrModelClosed = errors.New("serve: model closed")

// jobSample is the noise stream index of a job: every job is sample 0 of its seed, as the
// first sample of `vdpp generate`.
const jobSample = 0

// ModelSpec names the model every process of a server loads: the coordinator its
// conditioning and decoding roles (OpenModel), each worker its denoising role. Everything
// else about the model (defaults, latent shape, scheduler, batching, costs) is asked of its
// family (package model/family).
type ModelSpec struct {
	// Name is the registered family's name (family.Lookup); Dir the model
	// folder, "" for a family that needs none. `--model builtin` and `--model DIR` resolve
	// to the family their model_index.json names, with that folder.
	Name string
	Dir  string
	// Variant is the checkpoint's weights variant ("" for fp32, "fp16"); Backend the GoMLX
	// backend spec ("" for the default). Both only matter to checkpoint models.
	Variant, Backend string
	// Weights say where the denoiser's weights come from and the type they are held in
	// (--weights-dtype, --transformer, --transformer-2, --unet).
	Weights family.WeightOptions
	// StepMS and Cost are the simulator denoisers' knobs (model.Config).
	StepMS float64
	Cost   string
	// LoadProgress, when not nil, is told as a large component loads (the text encoder).
	LoadProgress func(component string, loaded, total int64) `json:"-"`
	// LoRADir is the folder of the LoRAs jobs may name (--lora-dir; "" takes none): a job's
	// lora and lora_2 list files in it by name, applied per call over the shared weights.
	LoRADir string
}

// resolve returns spec's family and folder.
func (m ModelSpec) resolve() (family.Resolved, error) {
	f, ok := family.Lookup(m.Name)
	if !ok {
		return family.Resolved{}, fmt.Errorf("serve: %w %q (known: %v)", family.ErrUnknown, m.Name, family.Names())
	}
	if f.NeedsDir() && m.Dir == "" {
		return family.Resolved{}, fmt.Errorf("serve: model %q needs a checkpoint folder", m.Name)
	}
	return family.Resolved{Family: f, Dir: m.Dir}, nil
}

// options are the family options of a process loading roles.
func (m ModelSpec) options(roles family.Roles) family.Options {
	return family.Options{Variant: m.Variant, Backend: m.Backend, Roles: roles, Weights: m.Weights,
		Sim: model.Config{Name: m.Name, Dir: m.Dir, Variant: m.Variant, Backend: m.Backend, StepMS: m.StepMS, Cost: m.Cost}}
}

// generator is the model edge of the coordinator and the HTTP layer: a job's parameters,
// its initial sample and its frames. *Model is the one the server runs; tests swap others.
type generator interface {
	// DefaultParams are the parameters of a job whose JSON leaves them out.
	DefaultParams() job.Params
	// Description is the family's description of the model.
	Description() family.Description
	// TextConditioned reports whether jobs give a prompt (text-to-video) rather than an
	// image.
	TextConditioned() bool
	// ParseParams parses a job's JSON parameters (see Model.ParseParams).
	ParseParams(data []byte, lim job.Limits) (job.Params, error)
	// ResolveParams resolves the knobs given of p over the model's defaults (see
	// Model.ResolveParams).
	ResolveParams(p job.Params, given knob.Given, lim job.Limits) (job.Params, error)
	// Unknown says what a knob of another family is (see Model.Unknown).
	Unknown(name string) string
	// StepWork is the work of one denoising step of p (see Model.StepWork).
	StepWork(p job.Params) float64
	// ServedDefaults are what a job that leaves its knobs out gets (the model's defaults,
	// or those SetServedDefaults fitted to the server); SetServedDefaults sets them before
	// the server serves.
	ServedDefaults() job.Params
	SetServedDefaults(p job.Params)
	// Activation estimates a job's working memory: its step, its decode or its image's
	// conditioning, whichever is largest.
	Activation() job.ActivationFunc
	// MaxBatch is --max-batch's default.
	MaxBatch() int
	// Weights are the model's weight bytes by role; StepSecondsPerUnit predicts a step's
	// time before one was measured (see Model).
	Weights() plan.Weights
	StepSecondsPerUnit() float64
	// Scheduler is the model's scheduler of a job with parameters p (its steps and
	// sampler choice).
	Scheduler(p job.Params) (sched.Scheduler, error)
	// Prepare builds a job's initial sample, deterministic in (in, p).
	Prepare(ctx context.Context, in family.Input, p job.Params, sc sched.Scheduler) (*dispatch.Sample, error)
	// Decode turns a final latent [1, T, C, H, W] into frames [F, 3, p.Height, p.Width]
	// with values in [0, 1].
	Decode(ctx context.Context, latent *tensor.Dense, p job.Params) (*tensor.Dense, error)
	Close() error
}

// Model is the coordinator's share of the served model: its family's Sampler loaded with
// the conditioning and decoding roles (no denoiser), and the folder's Description. It runs
// one network call at a time; parameter checks never wait for a running network.
type Model struct {
	// defaults are the parameters of a job whose JSON leaves them out; they never change.
	defaults job.Params
	// desc describes the model (sizes, frames, windowing, batching); it never changes.
	desc family.Description
	// check validates parameters against the checkpoint's configs; it never changes.
	check func(family.Params) error
	// act estimates a step's working memory; it only reads configs, so it needs no lock.
	act job.ActivationFunc
	// switches are the steps where the model's denoiser changes in a run of steps steps
	// (each expert's first call computes under a step cache); nil: none.
	switches func(steps int) ([]int, error)
	// family names the model's family, for messages; unknown says what a knob of another
	// family's is (nil: nothing).
	family  string
	unknown knob.Unknown
	// weights are the model's weight bytes by role (the family's sizes, from its configs).
	weights plan.Weights
	// channels are the latent channels of the model's native job.
	channels int
	// cacheCost is the family's cost of a step cache rule on a latent (nil: none known).
	cacheCost func(rule pipeline.Cache, latent []int) (family.CacheCost, error)

	// loraDir is --lora-dir; checkLoRAs maps a job's LoRAs onto the model (nil: none taken).
	loraDir    string
	checkLoRAs func(family.LoRAs) error

	// mu holds one network call at a time: a token taken by lock, which gives up when the
	// caller's context ends (a cancelled prepare does not wait for a long decode).
	mu chan struct{}
	s  family.Sampler // nil once closed
}

// lock takes the model for one call, or returns ctx's error first.
func (g *Model) lock(ctx context.Context) error {
	select {
	case g.mu <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// unlock gives the model back.
func (g *Model) unlock() { <-g.mu }

var _ generator = (*Model)(nil)

// LoRAs lists the LoRA files jobs may name (the *.safetensors files of --lora-dir, sorted);
// nil when the server takes none.
func (g *Model) LoRAs() []string {
	if g.loraDir == "" {
		return nil
	}
	names, _ := filepath.Glob(filepath.Join(g.loraDir, "*.safetensors"))
	out := []string{}
	for _, n := range names {
		out = append(out, filepath.Base(n))
	}
	return out
}

// checkJobLoRAs refuses a job's LoRAs the server cannot apply: none taken (no --lora-dir),
// a name that is not a plain file name of the folder, a file that does not map onto the
// model (one line naming the key).
func (g *Model) checkJobLoRAs(l family.LoRAs) error {
	if l.Empty() {
		return nil
	}
	if g.checkLoRAs == nil || g.loraDir == "" {
		return fmt.Errorf("%w: lora: this server takes no LoRAs (start it with --lora-dir DIR)", job.ErrBadParams)
	}
	for _, s := range append(slices.Clone(l.LoRA), l.LoRA2...) {
		if s.Path == "" || s.Path != filepath.Base(s.Path) || s.Path == "." || s.Path == ".." || strings.ContainsAny(s.Path, `/\`) {
			return fmt.Errorf("%w: lora %q: name a file of the server's LoRA folder (GET /v1/limits lists them)", job.ErrBadParams, s.Path)
		}
	}
	if err := g.checkLoRAs(l); err != nil {
		// The file's name, not the server's path to it.
		msg := strings.ReplaceAll(err.Error(), g.loraDir+string(filepath.Separator), "")
		msg = strings.TrimPrefix(strings.TrimPrefix(msg, family.ErrParams.Error()+": "), lora.ErrLoRA.Error()+": ")
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%w: lora: no such file in the server's LoRA folder: %s", job.ErrBadParams, msg)
		}
		return fmt.Errorf("%w: lora: %s", job.ErrBadParams, msg)
	}
	return nil
}

// OpenModel loads the conditioning and decoding roles of spec's family: for a
// text-to-video family (its Description has a TextDim) the conditioner is the tokenizer
// and text encoder, and a folder without them is refused.
func OpenModel(spec ModelSpec) (*Model, error) {
	r, err := spec.resolve()
	if err != nil {
		return nil, err
	}
	desc, err := r.Describe()
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	o := spec.options(family.Roles{Condition: true, Decode: true})
	o.Prompts, o.Progress = desc.TextDim > 0, spec.LoadProgress
	s, err := r.Open(o)
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	g := NewModel(s, desc, spec)
	g.switches, g.cacheCost = r.Switches, r.CacheCost
	g.loraDir = spec.LoRADir
	g.checkLoRAs = func(l family.LoRAs) error { return r.CheckLoRAs(l, spec.LoRADir) }
	if g.weights, err = plan.FamilyWeights(r, spec.options(family.Roles{}), g.defaults.Steps, s); err != nil {
		g.Close()
		return nil, fmt.Errorf("serve: %w", err)
	}
	if shape := s.LatentShape(desc.Defaults); len(shape) == 4 {
		g.channels = max(shape[1], 1)
	}
	return g, nil
}

// NewModel wraps a loaded sampler (conditioning and decoding roles), which it owns from now
// on, described by desc. A job's defaults are the sampler's (the folder's, for a checkpoint:
// its vdpp_sampling.json's guidance and decode chunk); its knobs desc's, else those of the
// sampler's registered family.
func NewModel(s family.Sampler, desc family.Description, spec ModelSpec) *Model {
	d := job.Params(s.DefaultParams())
	desc.Defaults = family.Params(d)
	if desc.Knobs == nil {
		if f, ok := family.Lookup(s.Family()); ok {
			desc.Knobs = f.Knobs()
		}
	}
	g := &Model{defaults: d, desc: desc, check: s.Validate, s: s, family: s.Family(), channels: 1, mu: make(chan struct{}, 1)}
	if f, ok := family.Lookup(s.Family()); ok {
		g.unknown = family.Unknown(f)
	}
	if est, ok := s.(family.ActivationEstimator); ok {
		g.act = func(p job.Params) int64 { return est.StepActivationBytes(family.Params(p)) }
	} else {
		g.act = latentActivation(s.LatentShape, desc)
	}
	if est, ok := s.(family.ConditionEstimator); ok {
		// An image job's conditioning (the VAE encode of its condition, the image encoder)
		// runs in the coordinator's prepare: the job needs the larger of the two.
		step := g.act
		g.act = func(p job.Params) int64 { return max(step(p), est.ConditionActivationBytes(family.Params(p))) }
	}
	return g
}

// latentActivation is the ActivationFunc of a model without its own estimate: the float32
// latent of p (one window's for a long video), once per classifier-free guidance row.
func latentActivation(shape func(family.Params) []int, desc family.Description) job.ActivationFunc {
	return func(p job.Params) int64 {
		n := int64(4)
		for _, d := range shape(family.Params(p).StepParams()) {
			n *= int64(max(d, 1))
		}
		if desc.Guided(family.Params(p)) {
			n *= 2
		}
		return n
	}
}

// DefaultParams are the model's own defaults (its native job: the cost limits derive from
// it); a job that leaves its knobs out gets ServedDefaults.
func (g *Model) DefaultParams() job.Params { return g.defaults }

// ServedDefaults are the parameters of a job whose JSON leaves them out: the model's own,
// or those the server fitted to itself (SetServedDefaults).
func (g *Model) ServedDefaults() job.Params { return job.Params(g.desc.Defaults) }

// SetServedDefaults makes p the defaults of a job that leaves its knobs out (before the
// server serves: the model is not locked).
func (g *Model) SetServedDefaults(p job.Params) { g.desc.Defaults = family.Params(p) }

// StepWork is the work of one denoising step of p, as the stall watchdog counts it: the
// elements of one step's latent (one window's, for a long video), twice under guidance.
func (g *Model) StepWork(p job.Params) float64 {
	if g.s == nil {
		return 0
	}
	n := 1.0
	for _, d := range g.s.LatentShape(family.Params(p).StepParams()) {
		n *= float64(max(d, 1))
	}
	if g.desc.Guided(family.Params(p)) {
		n *= 2
	}
	return n
}

// Description is the family's description of the model.
func (g *Model) Description() family.Description { return g.desc }

// TextConditioned reports whether the model is conditioned on prompts (then jobs give a
// prompt and no image).
func (g *Model) TextConditioned() bool { return g.desc.TextDim > 0 }

// Activation estimates the working bytes of a job's denoising step (or its decode, or its
// image's conditioning, when larger), from the model's real sizes where its family has an
// estimate (family.ActivationEstimator, family.ConditionEstimator), else the latent's.
func (g *Model) Activation() job.ActivationFunc { return g.act }

// Weights are the model's weight bytes by pipeline role: the coordinator holds the
// conditioner and the decoder, each worker rank the denoiser (or the experts of its steps).
func (g *Model) Weights() plan.Weights { return g.weights }

// FirstStepFLOPs is the floor throughput that predicts a step's time before any step was
// measured: one slow CPU core (the stall watchdog's prior, StepSecondsPerUnit).
const FirstStepFLOPs = 1e9

// StepSecondsPerUnit predicts the seconds of one unit of step work (one latent element of
// a row, two under guidance: the stall watchdog's measure) before any step was measured:
// a denoiser's call costs about 2 FLOPs per parameter per latent position (a position is a
// row's latent elements over its channels), at FirstStepFLOPs. It overestimates (a
// network applies most weights at lower resolutions), so a slow first step is not taken
// for a stall; 0 for a model whose weights are unknown (the simulators).
func (g *Model) StepSecondsPerUnit() float64 {
	params := float64(g.weights.Denoiser) / 4
	return 2 * params / float64(g.channels) / FirstStepFLOPs
}

// MaxBatch is --max-batch's default: 4 for a model whose rows are computed independently
// (family.Description.IndependentRows), 1 for every other (a checkpoint's rows are not
// promised bit-independent of the batch they share, see Reference).
func (g *Model) MaxBatch() int {
	if g.desc.IndependentRows {
		return 4
	}
	return 1
}

// Scheduler is the family's scheduler of a job with parameters p: its steps and sampler
// choice (the workers build the same from the steps and the run spec).
func (g *Model) Scheduler(p job.Params) (sched.Scheduler, error) {
	g.lock(context.Background())
	defer g.unlock()
	if g.s == nil {
		return nil, ErrModelClosed
	}
	sc, err := g.s.Scheduler(family.Params(p))
	if err != nil {
		return nil, fmt.Errorf("serve: scheduler for %d steps: %w", p.Steps, err)
	}
	return sc, nil
}

// Close releases the loaded networks; it waits for a call in progress.
func (g *Model) Close() error {
	g.lock(context.Background())
	defer g.unlock()
	if g.s == nil {
		return nil
	}
	err := g.s.Close()
	g.s = nil
	return err
}

// ParseParams parses a job's JSON parameters by the model's knob table (job.ParseJob: each
// key a knob of the family's, of its kind, in its range, given once; a knob of another
// family refused naming it), over the model's defaults, checked by the model (sizes the VAE
// takes, frame counts) and against lim (ErrTooLarge beyond, ErrBadParams out of range),
// with the step cache resolved (ResolveParams).
func (g *Model) ParseParams(data []byte, lim job.Limits) (job.Params, error) {
	var p family.Params
	// The LoRAs are files of the server's folder, not knobs: read beside the table.
	data, loras, err := job.SplitLoRAs(data)
	if err != nil {
		return job.Params{}, err
	}
	given, err := g.desc.Knobs.DecodeJSON(data, &p, g.unknown)
	if err != nil {
		return job.Params{}, fmt.Errorf("%w: %w", job.ErrBadParams, err)
	}
	p.LoRAs = loras
	return g.ResolveParams(job.Params(p), given, lim)
}

// Unknown says what a knob name that the model's table lacks is: another family's knob
// ("applies to svd models; ..."), or "" for none.
func (g *Model) Unknown(name string) string {
	if g.unknown == nil {
		return ""
	}
	return g.unknown(name)
}

// ResolveParams returns the job whose knobs given are set as in p, the rest the model's
// defaults (but the seed: left out, or -1, it is drawn at random) (job.Resolve: checked together, by the model and against lim; a video longer
// than the model's native length cut into temporal windows, a job of one window keeping
// them zero), and its step cache filled and checked against its steps (a mode the model
// offers). Every refusal names the knob (knob.AsError finds it).
func (g *Model) ResolveParams(in job.Params, given knob.Given, lim job.Limits) (job.Params, error) {
	p, err := job.Resolve(in, given, g.desc, g.check, lim)
	if err != nil {
		return p, err
	}
	p.LoRAs = in.LoRAs
	if err := g.checkJobLoRAs(p.LoRAs); err != nil {
		return job.Params{}, err
	}
	if !given["seed"] || p.Seed == knob.RandomSeed {
		// A job that leaves its seed out (or asks -1) gets a random one, recorded in its
		// params: the same params give the same video again.
		p.Seed = knob.DrawSeed()
	}
	if !p.Cache.On() {
		return p, nil
	}
	// The step cache (docs/caching.md): a mode the model offers, filled and checked
	// against the job's steps.
	var switches []int
	if g.switches != nil {
		if switches, err = g.switches(p.Steps); err != nil {
			return job.Params{}, err
		}
	}
	if p.Cache, err = g.desc.ResolveCache(p.Cache, p.Steps, switches, g.family); err != nil {
		if ke, ok := knob.AsError(err); ok {
			return job.Params{}, fmt.Errorf("%w: %w", job.ErrBadParams, ke.With(g.desc.Knobs))
		}
		return job.Params{}, fmt.Errorf("%w: %s", job.ErrBadParams, strings.TrimPrefix(err.Error(), pipeline.ErrCache.Error()+": "))
	}
	return p, nil
}

// Prepare builds the initial sample of a job (sample jobSample of p.Seed): from in.Image for
// an image-conditioned model, from in.Prompt for a text-to-video one (the text encoder
// encodes each text once; the negative prompt, shared by most jobs, stays cached).
func (g *Model) Prepare(ctx context.Context, in family.Input, p job.Params, sc sched.Scheduler) (*dispatch.Sample, error) {
	switch {
	case g.TextConditioned() && in.Prompt == nil:
		return nil, fmt.Errorf("%w: the model is text-to-video and needs a prompt", job.ErrBadParams)
	case g.desc.ImageNeed() == family.NeedRequired && in.Image == nil:
		return nil, fmt.Errorf("%w: the model is image-conditioned and needs an image", job.ErrBadParams)
	case g.desc.LastImage == family.NeedRequired && in.LastImage == nil:
		return nil, fmt.Errorf("%w: the model is first-last-frame and needs a last image", job.ErrBadParams)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := g.lock(ctx); err != nil {
		return nil, err
	}
	defer g.unlock()
	if g.s == nil {
		return nil, ErrModelClosed
	}
	if err := g.check(family.Params(p)); err != nil {
		return nil, fmt.Errorf("%w: %w", job.ErrBadParams, err)
	}
	it, err := g.s.Prepare(ctx, in, family.Params(p), sc, []int64{jobSample})
	if err != nil {
		return nil, fmt.Errorf("serve: prepare: %w", err)
	}
	smp := &dispatch.Sample{Latent: it.Latent, Cond: it.Cond[0], Guidance: it.Guidance, Windows: g.desc.Windows(family.Params(p), g.s),
		Cache: pipeline.NewItemCache(p.Cache, 1), Sched: it.SchedState}
	if p.Cache.On() && g.cacheCost != nil {
		cost, err := g.cacheCost(p.Cache, g.s.LatentShape(family.Params(p)))
		if err != nil {
			return nil, fmt.Errorf("serve: prepare: %w", err)
		}
		smp.CacheReuse = cost.ReuseFraction
	}
	return smp, nil
}

// Decode is the family's Decode of latent [1, T, C, h, w], through its family.ChunkDecoder
// where it has one, so the decoder's working memory is one chunk group's rather than the
// whole video's (the frames are the same bits).
func (g *Model) Decode(ctx context.Context, latent *tensor.Dense, p job.Params) (*tensor.Dense, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := g.lock(ctx); err != nil {
		return nil, err
	}
	defer g.unlock()
	if g.s == nil {
		return nil, ErrModelClosed
	}
	if cd, ok := g.s.(family.ChunkDecoder); ok {
		return decodeByChunks(ctx, cd, latent, family.Params(p))
	}
	return g.s.Decode(ctx, latent, family.Params(p))
}

// decodeByChunks joins the frames cd.DecodeChunks emits, in order, into Decode's
// [T, 3, H, W]; room for p.NumFrames frames is taken up front.
func decodeByChunks(ctx context.Context, cd family.ChunkDecoder, latent *tensor.Dense, p family.Params) (*tensor.Dense, error) {
	var data []float32
	var frame []int // [3, H, W] of every frame
	frames := 0
	err := cd.DecodeChunks(ctx, latent, p, func(first int, f *tensor.Dense) error {
		if len(f.Shape) != 4 || tensor.NumElements(f.Shape) != len(f.Data) {
			return fmt.Errorf("serve: decoded chunk of shape %v with %d values, want [k, 3, H, W]", f.Shape, len(f.Data))
		}
		if frame == nil {
			frame = slices.Clone(f.Shape[1:])
			data = make([]float32, 0, max(p.NumFrames, f.Shape[0])*tensor.NumElements(frame))
		}
		if first != frames || !slices.Equal(f.Shape[1:], frame) {
			return fmt.Errorf("serve: decoded chunk at frame %d of shape %v after %d frames of %v", first, f.Shape, frames, frame)
		}
		data = append(data, f.Data...)
		frames += f.Shape[0]
		return nil
	})
	if err != nil {
		return nil, err
	}
	if frames == 0 {
		return nil, fmt.Errorf("serve: the decoder emitted no frames")
	}
	return &tensor.Dense{Shape: append([]int{frames}, frame...), Data: data}, nil
}

// Reference runs a job the way one process would: the model's Prepare, then every step
// with one Stepper (the family's denoising role, as the workers load it) on a batch of one.
// Its result is what the server's output must equal, bit for bit.
func Reference(ctx context.Context, spec ModelSpec, g *Model, in family.Input, p job.Params) (*tensor.Dense, error) {
	steppers, closeModel, err := workerSteppers(spec, nil)
	if err != nil {
		return nil, err
	}
	defer closeModel()
	return runReference(ctx, g, steppers, in, p)
}

// runReference is Reference with the stepper factory of a worker.
func runReference(ctx context.Context, g generator, steppers func(steps int, spec string) (*pipeline.Stepper, func(), error), in family.Input, p job.Params) (*tensor.Dense, error) {
	st, release, err := steppers(p.Steps, p.RunSpec())
	if err != nil {
		return nil, err
	}
	if release != nil {
		defer release()
	}
	s, err := g.Prepare(ctx, in, p, st.Sched)
	if err != nil {
		return nil, err
	}
	it := &pipeline.Item{Samples: []int64{0}, Latent: s.Latent.Clone(), Cond: []model.Conditioning{s.Cond}, Guidance: s.Guidance, Windows: s.Windows, Cache: s.Cache, SchedState: s.Sched}
	for it.Step = 0; it.Step < p.Steps; it.Step++ {
		if err := st.Step(ctx, it); err != nil {
			return nil, fmt.Errorf("serve: reference step %d: %w", it.Step, err)
		}
	}
	return it.Latent, nil
}
