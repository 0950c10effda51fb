// Package family is the seam between vdpp's engine and a model family (Stable Video
// Diffusion, Wan): everything that differs between families sits behind one
// Sampler, so generate, serve, eval, parity and bench run any family with the same code.
//
// A Sampler is one process's share of a family's sampling sequence, loaded for its pipeline
// roles (Roles): on the first stage it prepares each sample's conditioning and initial noise
// (Prepare), on every stage it supplies the denoiser(s) and the scheduler of a step
// (Stepper, Scheduler), and on the last stage it turns a final latent into frames (Decode).
// The loop between them is pipeline.Stepper's, the engine's; no caller writes a family's
// sampling sequence itself.
//
// A video longer than the model's native length is cut into overlapping temporal windows
// by the engine; the family only describes how (Description: the VAE's temporal factor, the
// native length, its default Windowing; a WindowGuider for guidance that depends on the
// clip's length), and Description.ResolveWindows / Description.Windows turn a request's
// window, overlap and blend in video frames into the engine's windows in latent frames.
//
// Contract: families register themselves (Register) in an init function; a binary gets them
// by a blank import of model/families. Resolve turns a --model value into a family and a
// folder: a registered name ("synthetic", "dummy"), an alias ("builtin"), or a diffusers
// folder whose model_index.json _class_name names the family. Prepare is deterministic in
// (input, params, sample): the same sample gets the same bits in any process.
package family

import (
	"context"
	"errors"
	"fmt"
	"image"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/vdpp/vdpp/internal/cli"
	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/model/checkpoint"
	"github.com/vdpp/vdpp/model/knob"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/sched"
	"github.com/vdpp/vdpp/tensor"
)

// ErrUnknown is returned by Resolve for a --model value no family claims.
var ErrUnknown = errors.New("family: unknown model")

// ErrParams marks generation parameters a model cannot run (knob.ErrParams: every
// *knob.Error wraps it).
var ErrParams = knob.ErrParams

// Params are the knobs of one generation, the same for every surface (the flags of
// `vdpp generate`, a server job's JSON, eval's settings). A field is a knob when a family's
// table (Family.Knobs) declares its JSON name: adding a knob is a field here and an entry
// in the tables of the families that read it. A family reads the fields of its table and
// its Validate refuses values it cannot run; fields of another family's knobs stay zero.
type Params struct {
	NumFrames        int     `json:"num_frames"`
	Steps            int     `json:"steps"`
	Height           int     `json:"height"`
	Width            int     `json:"width"`
	MinGuidance      float64 `json:"min_guidance"`
	MaxGuidance      float64 `json:"max_guidance"`
	FPS              int     `json:"fps"`
	MotionBucketID   int     `json:"motion_bucket_id"`
	NoiseAugStrength float64 `json:"noise_aug_strength"`
	DecodeChunkSize  int     `json:"decode_chunk_size"` // <= 0: all frames at once
	Seed             int64   `json:"seed"`
	// GuidanceScale is the classifier-free guidance scale of text-to-video families (Wan:
	// > 1 turns CFG on); GuidanceScale2 is that of the low-noise expert of a two-expert
	// model (0: the same as GuidanceScale). SVD reads MinGuidance/MaxGuidance instead.
	GuidanceScale  float64 `json:"guidance_scale,omitempty"`
	GuidanceScale2 float64 `json:"guidance_scale_2,omitempty"`
	// VAETile, when > 0, makes the VAE decode (and encode) in overlapping spatial tiles of
	// this many pixels (diffusers' enable_tiling); -1 tiles at the VAE config's
	// sample_size, as enable_tiling does; 0 does not tile. Families without tiling ignore it.
	VAETile int `json:"vae_tile,omitempty"`
	// Window, Overlap and Blend cut a video longer than the model's native length into
	// overlapping temporal windows denoised together, in video frames (0 window: the
	// family's; -1 overlap: the family's; "" blend: the family's). Description.ResolveWindows
	// fills and checks them; Description.Windows turns them into the engine's windowing.
	Window  int    `json:"window,omitempty"`
	Overlap int    `json:"overlap,omitempty"`
	Blend   string `json:"blend,omitempty"`
	// Cache is the step cache (docs/caching.md): which denoiser calls reuse work of an
	// earlier step. Its fields are the JSON parameters cache, cache_threshold,
	// cache_interval, cache_branch, cache_steps and cache_drop; Resolved.ResolveCache fills
	// and checks it against the model.
	pipeline.Cache
	// SchedulerChoice is the sampler and the flow shift (the JSON parameters scheduler and
	// flow_shift; Description.CheckScheduler checks them against the model).
	SchedulerChoice
	// LoRAs are the generation's LoRAs (the JSON parameters lora and lora_2). A Sampler
	// applies those its Options named at Open; the others through LoRARunner.
	LoRAs
}

// Guided reports whether classifier-free guidance is on (diffusers: max guidance > 1).
func (p Params) Guided() bool { return p.MaxGuidance > 1 }

// Roles are what a process loads: the conditioner on the first stage, the denoiser(s) of
// its steps on every stage, the decoder on the last stage.
type Roles struct {
	Condition bool // first stage: conditioning and initial noise (Prepare)
	Denoise   bool // the denoiser(s) of Steps (Stepper)
	Decode    bool // last stage: the decoder (Decode)
	// Steps are the steps this process runs, of TotalSteps: a family with several
	// denoisers by step range (experts) loads only those these steps use, under the
	// schedule of Schedule (which moves an expert switch). Zero means all.
	Steps      pipeline.Range
	TotalSteps int
	Schedule   SchedulerChoice
}

// AllRoles is a one-process run.
var AllRoles = Roles{Condition: true, Denoise: true, Decode: true}

// Options say how to load a model.
type Options struct {
	Variant string // weights variant ("" for fp32, "fp16")
	Backend string // GoMLX backend spec ("" for the default)
	Roles   Roles
	// Sim carries the knobs of the simulator denoisers (step cost, channels, weights
	// seed); checkpoint families ignore it.
	Sim model.Config
	// Prompts says the conditioner encodes text prompts (Input.Prompt): a text-to-video
	// family loads its tokenizer and text encoder with the Condition role. Without it
	// the family takes prompt embeddings and loads no text encoder.
	Prompts bool
	// Progress, when not nil, is called as a large component loads (the text encoder):
	// its name, the bytes read so far and the total.
	Progress func(component string, loaded, total int64)
	// LoRAs are merged into the denoisers' weights as they load (files relative to LoRADir
	// when it is not ""); a family that takes no LoRA refuses them.
	LoRAs   LoRAs
	LoRADir string
	// Weights say where the denoiser's weights come from and the type they are held in
	// (--weights-dtype, --transformer, --transformer-2, --unet).
	Weights WeightOptions
}

// Input is what a generation starts from: an image for image-to-video families (and a last
// image where the model takes one); for
// text-to-video families a prompt (encoded by the family's text encoder, loaded with
// Options.Prompts) or prompt embeddings (Wan: [L, text_dim] or [1, L, text_dim], the text
// encoder's output; the negative ones are the unconditional half of CFG).
type Input struct {
	Image image.Image
	// LastImage is the last frame's image of a first-last-frame model (Description.LastImage).
	LastImage            image.Image
	Prompt               *Prompt
	PromptEmbeds         *tensor.Dense
	NegativePromptEmbeds *tensor.Dense
}

// Prompt is the text of a text-to-video generation: the prompt and the negative prompt
// (the unconditional half of CFG; "" as diffusers when none is given).
type Prompt struct {
	Text     string `json:"prompt"`
	Negative string `json:"negative_prompt"`
}

// Sampler is one process's share of a family's sampling sequence (see the package doc).
// Methods of roles the process did not load return an error.
type Sampler interface {
	// Family is the registered family name ("svd").
	Family() string
	// DefaultParams are the parameters of a generation that sets none: the checkpoint's
	// frame count, size, guidance and decode chunk.
	DefaultParams() Params
	// Validate reports parameters the model cannot run (wrapping ErrParams).
	Validate(p Params) error
	// LatentShape is one sample's latent [T, C, h, w] for p (T after any temporal
	// compression of the VAE).
	LatentShape(p Params) []int
	// Scheduler is the family's scheduler for p.Steps inference steps: the one p.Scheduler
	// names (Description.Schedulers; "" the folder's own), with p.FlowShift on a flow model.
	Scheduler(p Params) (sched.Scheduler, error)
	// Prepare (first stage) returns the item of samples at step 0: the initial latent
	// [len(samples), T, C, h, w] already scaled by sc.InitSigma(), one Conditioning per
	// sample and, when guided, the per-frame guidance weights. Group and Step are zero.
	Prepare(ctx context.Context, in Input, p Params, sc sched.Scheduler, samples []int64) (*pipeline.Item, error)
	// Stepper (every stage) returns a step runner with the denoiser(s) this process
	// loaded (an expert per step range where the family has several) and sc.
	Stepper(sc sched.Scheduler) (*pipeline.Stepper, error)
	// Decode (last stage) turns one sample's final latent [T, C, h, w] (or [1, T, C, h, w])
	// into frames [F, 3, p.Height, p.Width] with values in [0, 1].
	Decode(ctx context.Context, latent *tensor.Dense, p Params) (*tensor.Dense, error)
	// WeightBytes is the weight memory held, per component (report.json, the planner).
	WeightBytes() map[string]int64
	// Close releases what was loaded.
	Close() error
}

// KernelReporter is implemented by Samplers whose networks run on a compute backend:
// Kernels says in one line which kernels they run with (the backend, and on the pure-Go
// backend which of vdpp's CPU kernels), for report.json; "" when nothing is loaded.
type KernelReporter interface {
	Kernels() string
}

// TypedWeights is implemented by samplers that say how many bytes their weights hold in each
// weight type ("f32", "bf16", "q8_0", ... as tensor/quant names them): report.json's
// weight_bytes_by_type. A sampler without it holds float32 only.
type TypedWeights interface {
	WeightTypes() map[string]int64
}

// WeightTypesOf is s's TypedWeights, or its WeightBytes as float32.
func WeightTypesOf(s Sampler) map[string]int64 {
	if t, ok := s.(TypedWeights); ok {
		return t.WeightTypes()
	}
	var n int64
	for _, b := range s.WeightBytes() {
		n += b
	}
	if n == 0 {
		return nil
	}
	return map[string]int64{"f32": n}
}

// DenoiserReleaser is implemented by Samplers that can free their denoiser's weights once a
// process has no steps left to run: the engine calls ReleaseDenoiser before the last decode
// of a process that both denoises and decodes (one process, or the last stage), so the
// decode's memory does not come on top of the denoiser's. Step must not be called after it.
type DenoiserReleaser interface {
	ReleaseDenoiser() error
}

// ChunkDecoder is implemented by Samplers that can decode a final latent a few frames at a
// time, so a long video is written without all its frames held at once.
type ChunkDecoder interface {
	// DecodeChunks decodes as Decode does and hands the frames to emit in order, as soon as
	// a group of them is decoded: frames [k, 3, p.Height, p.Width] in [0, 1], first being
	// the index of their first frame. Together they are Decode's frames, bit for bit. emit
	// may keep nothing it is given; an error from emit stops the decode and is returned.
	DecodeChunks(ctx context.Context, latent *tensor.Dense, p Params, emit func(first int, frames *tensor.Dense) error) error
}

// RandomConditioner is implemented by Samplers whose denoiser can be benchmarked without
// the conditioner: it draws conditioning of the right shapes from r for a latent [T, C, h, w].
type RandomConditioner interface {
	RandomConditioning(r *rand.Rand, latent []int) model.Conditioning
}

// ActivationEstimator is implemented by Samplers that can estimate the working memory of
// a denoising step from their configs alone (the serve package's admission uses it).
type ActivationEstimator interface {
	// StepActivationBytes estimates the float32 working bytes of one denoiser call on one
	// sample of p (both rows under classifier-free guidance), from the checkpoint's real
	// sizes; weights are not included. A long video's call is one window's
	// (Params.StepParams). A family whose decode of one sample can need more
	// (Wan's causal VAE on a long video, SVD's temporal decoder on the pure-Go backend)
	// returns the larger of the two.
	StepActivationBytes(p Params) int64
}

// ConditionEstimator is implemented by Samplers of image-conditioned models that can
// estimate the working memory of one sample's image conditioning from their configs alone
// (the serve package's admission takes the larger of it and StepActivationBytes).
type ConditionEstimator interface {
	// ConditionActivationBytes estimates the working bytes of conditioning one sample of p
	// on its image(s), as the backend holds them: the image encoder's, the VAE encode of
	// the condition (for a video model that encodes a condition video, of all p's frames)
	// and what the conditioning keeps; weights are not included. 0 for a job the model
	// conditions on no image.
	ConditionActivationBytes(p Params) int64
}

// Description is what a model folder says about generations before any weights load.
type Description struct {
	// Defaults are the parameters of a generation that sets none (the sampler's
	// DefaultParams): the checkpoint's frame count, native size, guidance, decode chunk.
	Defaults Params
	// SizeMultiple is what height and width must be positive multiples of (the VAE's
	// spatial factor).
	SizeMultiple int
	// FrameMultiple, when > 0, says frame counts must be 1 + k·FrameMultiple (a causal
	// VAE's temporal factor: Wan's 4).
	FrameMultiple int
	// TextDim, when > 0, says the family is conditioned on prompt embeddings of this width
	// (Input.PromptEmbeds, `--prompt-embeds`) rather than on an image; TextDimFile is the
	// config file that sets it, for messages.
	TextDim     int
	TextDimFile string
	// Image and LastImage say whether a generation takes an image (the first frame's) and a
	// last image (the last frame's, Input.LastImage): SVD needs an image, a Wan
	// image-to-video model an image and, for a first-last-frame model, a last image.
	Image, LastImage Need
	// Windows are the family's defaults for a video longer than its native length (zero
	// fields: the engine's; see ResolveWindows).
	Windowing Windowing
	// IndependentRows says the denoiser computes each row of a batch bit-identically
	// whatever other rows share its call, so rows of different jobs may be batched without
	// changing any job's result (a server batches only such models by default). A
	// checkpoint's network does not promise it (its kernels may block rows together).
	IndependentRows bool
	// VAETiling says the VAE can decode (and encode) in overlapping spatial tiles
	// (Params.VAETile, diffusers' enable_tiling).
	VAETiling bool
	// Caching is what the denoiser can reuse between steps (zero: nothing).
	Caching Caching
	// Knobs are the family's job parameters (Family.Knobs; Resolved.Describe fills them):
	// what a job may set, their ranges, and how every surface spells them.
	Knobs knob.Table
	// Schedulers are the samplers the model offers (Params.Scheduler), the folder's own
	// first; FlowShift is the folder's flow shift, 0 for a model that is not a flow model
	// (which takes no flow_shift).
	Schedulers []SchedulerInfo
	FlowShift  float64
	// StatedCost says the denoiser's call costs exactly the step time it is given
	// (Options.Sim's StepMS), linear in frames, and its context-parallel step exchanges
	// nothing but the output gather: a plan may predict it from the stated cost without
	// measuring (the "synthetic" simulator).
	StatedCost bool
}

// ImageNeed is whether a generation takes an image: Image, except that a family that is not
// text-conditioned (TextDim 0) and leaves Image unset is conditioned on its image, which it
// then requires.
func (d Description) ImageNeed() Need {
	if d.TextDim == 0 && d.Image == NeedNone {
		return NeedRequired
	}
	return d.Image
}

// Inputs are the inputs a job of the model gives (knob.AllInputs, each with its Need): a
// prompt and a negative prompt when it has a text encoder, an image and a last image as
// ImageNeed and LastImage say. Every surface that takes a job's inputs derives from them.
func (d Description) Inputs() knob.Inputs {
	text := knob.None
	negative := knob.None
	if d.TextDim > 0 {
		text, negative = knob.Required, knob.Optional
	}
	return knob.AllInputs.Need(map[string]knob.Need{"prompt": text, "negative_prompt": negative,
		"image": d.ImageNeed().Knob(), "last_image": d.LastImage.Knob()})
}

// Knob is the need as the knob table's inputs spell it.
func (n Need) Knob() knob.Need { return knob.Need(n.String()) }

// Need says whether a generation takes an input.
type Need int

const (
	NeedNone     Need = iota // the model takes none
	NeedOptional             // it takes one, and runs without
	NeedRequired             // it cannot run without
)

// String is "none", "optional" or "required".
func (n Need) String() string {
	switch n {
	case NeedOptional:
		return "optional"
	case NeedRequired:
		return "required"
	}
	return "none"
}

// Family is a registered model family.
type Family interface {
	// Name is the family's name ("svd"); it is also a --model value for families that
	// need no folder.
	Name() string
	// Claims reports whether a diffusers pipeline class (model_index.json's _class_name)
	// belongs to the family.
	Claims(pipelineClass string) bool
	// NeedsDir reports whether the family loads from a folder.
	NeedsDir() bool
	// Preflight checks the folder for o's roles without loading weights; errors name the
	// file.
	Preflight(dir string, o Options) error
	// Describe reads what the folder says about generations, without loading weights.
	Describe(dir string) (Description, error)
	// Knobs is the family's knob table: every Params field a job of the family may set,
	// the common ones (knob.Common) with the family's own, declared under model/<family>.
	Knobs() knob.Table
	// Open loads the folder (dir is "" for families that need none) for o's roles.
	Open(dir string, o Options) (Sampler, error)
}

var (
	mu       sync.RWMutex
	families = map[string]Family{}
	aliases  = map[string]func() (string, error){}
)

// Register makes a family available; it panics on a duplicate name.
func Register(f Family) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := families[f.Name()]; dup {
		panic("family: Register called twice for " + f.Name())
	}
	families[f.Name()] = f
}

// RegisterAlias makes name a --model value for the folder dir returns ("builtin").
func RegisterAlias(name string, dir func() (string, error)) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := aliases[name]; dup {
		panic("family: RegisterAlias called twice for " + name)
	}
	aliases[name] = dir
}

// Names lists the registered family names and aliases, sorted.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	var out []string
	for n := range families {
		out = append(out, n)
	}
	for n := range aliases {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// FamilyNames lists the registered family names (no aliases), sorted.
func FamilyNames() []string {
	mu.RLock()
	defer mu.RUnlock()
	return sortedNames()
}

// Lookup returns the family registered as name.
func Lookup(name string) (Family, bool) {
	mu.RLock()
	defer mu.RUnlock()
	f, ok := families[name]
	return f, ok
}

// Describe describes the resolved model (see Family.Describe), its Knobs the family's.
func (r Resolved) Describe() (Description, error) {
	d, err := r.Family.Describe(r.Dir)
	if err == nil && d.Knobs == nil {
		d.Knobs = r.Family.Knobs()
	}
	return d, err
}

// Resolved is what a --model value names.
type Resolved struct {
	Family Family
	Dir    string // the model folder; "" for a family that needs none
}

// Resolve turns a --model value into a family and a folder: a registered family that needs
// no folder ("synthetic"), an alias ("builtin"), a folder whose model_index.json
// _class_name a family claims, or a Hugging Face model id ORG/NAME[@REV] found in the local
// Hugging Face cache (ResolveHF). A family name that needs a folder ("svd") is refused with a
// hint, since the folder decides everything.
func Resolve(nameOrDir string) (Resolved, error) {
	mu.RLock()
	f, isFamily := families[nameOrDir]
	alias, isAlias := aliases[nameOrDir]
	mu.RUnlock()
	switch {
	case isFamily && !f.NeedsDir():
		return Resolved{Family: f}, nil
	case isAlias:
		dir, err := alias()
		if err != nil {
			return Resolved{}, err
		}
		return ResolveDir(dir)
	}
	if st, err := os.Stat(nameOrDir); err == nil && st.IsDir() {
		return ResolveDir(nameOrDir)
	}
	if isFamily {
		return Resolved{}, fmt.Errorf("%w %q: give the model folder (--model DIR)", ErrUnknown, nameOrDir)
	}
	if near := nearestModel(nameOrDir); near != "" {
		return Resolved{}, fmt.Errorf("%w %q (did you mean %s?)", ErrUnknown, nameOrDir, near)
	}
	if IsHFName(nameOrDir) {
		// ORG/NAME[@REV]: a model in the local Hugging Face cache.
		dir, err := ResolveHF(nameOrDir, os.Getenv)
		if err != nil {
			return Resolved{}, err
		}
		return ResolveDir(dir)
	}
	return Resolved{}, fmt.Errorf("%w %q: not a folder, a Hugging Face model id (ORG/NAME), nor one of %s", ErrUnknown, nameOrDir, strings.Join(Runnable(), ", "))
}

// Runnable lists the names a --model value may be without a folder: the aliases (the
// built-in models) and the families that need none (the simulators), sorted.
func Runnable() []string {
	mu.RLock()
	defer mu.RUnlock()
	var out []string
	for n, f := range families {
		if !f.NeedsDir() {
			out = append(out, n)
		}
	}
	for n := range aliases {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// nearestModel is the --model value nearest to a mistyped one: a built-in or simulator
// name, or for a path a folder beside it ("models/wan-dve" -> "models/wan-dev"); "" when
// nothing is close. A Hugging Face id whose ORG/NAME is not a folder is left alone (the
// cache lookup answers it).
func nearestModel(value string) string {
	if near := cli.Nearest(value, Runnable()); near != "" {
		return near
	}
	dir, base := filepath.Split(value)
	if base == "" || (!strings.ContainsAny(value, `/\`) && !strings.HasPrefix(value, ".")) {
		return ""
	}
	entries, err := os.ReadDir(filepath.Clean(dir + "."))
	if err != nil {
		return ""
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	if near := cli.Nearest(base, names); near != "" {
		return dir + near
	}
	return ""
}

// ResolveDir picks the family of a diffusers folder from its model_index.json.
func ResolveDir(dir string) (Resolved, error) {
	ck, err := checkpoint.Open(dir)
	if err != nil {
		return Resolved{}, err
	}
	class := ck.Index.ClassName
	mu.RLock()
	defer mu.RUnlock()
	for _, name := range sortedNames() {
		if families[name].Claims(class) {
			return Resolved{Family: families[name], Dir: dir}, nil
		}
	}
	return Resolved{}, fmt.Errorf("%w: %s: no family runs pipeline class %q", ErrUnknown, dir, class)
}

// sortedNames lists the families in name order; the caller holds mu.
func sortedNames() []string {
	out := make([]string, 0, len(families))
	for n := range families {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Open resolves nameOrDir and loads it for o.
func Open(nameOrDir string, o Options) (Sampler, error) {
	r, err := Resolve(nameOrDir)
	if err != nil {
		return nil, err
	}
	return r.Open(o)
}

// Open loads the resolved model for o.
func (r Resolved) Open(o Options) (Sampler, error) { return r.Family.Open(r.Dir, o) }

// Preflight checks the resolved model for o without loading weights.
func (r Resolved) Preflight(o Options) error { return r.Family.Preflight(r.Dir, o) }
