package bench

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/internal/cacheflag"
	"github.com/vdpp/vdpp/internal/cli"
	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/sched"

	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/plan"
)

// ErrOptions marks options `vdpp bench` refuses before any process starts; it is a
// command-line mistake (cli.ErrUsage).
var ErrOptions = fmt.Errorf("bench: bad options: %w", cli.ErrUsage)

// badOptions is an error about the options, ErrOptions, whose message is fmt.Errorf's.
func badOptions(format string, a ...any) error { return cli.Errorf(ErrOptions, format, a...) }

// Options are the flags of `vdpp bench`; the same set is passed to every worker.
type Options struct {
	// Model is the --model value: a simulator (synthetic, dummy), builtin, or a model
	// folder; ModelDir is the deprecated spelling --model svd --model-dir DIR.
	Model      string
	ModelDir   string
	TotalSteps int // 0: the model's
	// NumFrames, Height and Width are the video's, as `vdpp generate` takes them (0: the
	// model's); Resolve turns them into the latent dimensions below through the family.
	NumFrames, Height, Width int
	NumSamples               int
	WarmupSamples            int // -1: 4, at most NumSamples - 1
	MicroBatch               int
	HiddenChannels           int
	// LatentChannels, LatentFrames, LatentHeight, LatentWidth are one sample's latent
	// [T, C, H, W] (0: from the video's dimensions); LatentChannels of a simulator is also
	// its channel count.
	LatentChannels int
	LatentFrames   int
	LatentHeight   int
	LatentWidth    int
	StepMS         float64
	Cost           string
	Seed           int64
	NProc          int
	PP, CFG, CP    int
	DP             int
	Plan           string // "" or "auto": let the planner choose the mesh
	Goal           string // planner goal for --plan auto: throughput or latency
	NoBaseline     bool
	// MinGuidance and MaxGuidance are the per-frame guidance ramp of SVD and the
	// simulators; GuidanceScale is a text-to-video model's CFG scale (Wan). A run is
	// guided when MaxGuidance or GuidanceScale is above 1.
	MinGuidance   float64
	MaxGuidance   float64
	GuidanceScale float64
	// Schedule is the sampler and flow shift (--scheduler, --flow-shift; zero: the
	// folder's own): it changes the noise levels and updates, not a step's cost.
	Schedule family.SchedulerChoice
	Timeout  time.Duration
	// HeartbeatTimeout is how long a rank may hear nothing from another (not even a
	// heartbeat) before the run ends, naming the lost rank and its node (0: the default,
	// comm.DefaultHeartbeatTimeout).
	HeartbeatTimeout time.Duration
	JSON             string
	Trace            string
	SVG              string
	Backend          string
	// Weights are the load options of the model's weights (--weights-dtype and the files).
	Weights family.WeightOptions

	// DecodeRanks > 0 decodes every finished latent with the model's VAE: on the last
	// stage alone (1) or spread over the last N stages of each pipeline (N); 0 benchmarks
	// the denoiser only. DecodeChunkSize is the frames decoded together (-1: the model's).
	DecodeRanks     int
	DecodeChunkSize int
	// DecodeSteps is one sample's decode cost in denoising steps: with decode ranks, the
	// step cut balances it against the steps of the decoding stages, as vdpp plan does
	// (pipeline.StageExtras); 0 cuts by steps alone.
	DecodeSteps float64

	// Cache is the step cache (--cache and its flags, docs/caching.md); with one, the
	// same mesh also runs without it and the report gives both.
	Cache cacheflag.Flags

	// RunDir is where workers write their results (set by the parent for workers).
	RunDir string
}

// DefaultOptions are the values `vdpp bench` uses when a flag is not given: the workload
// sizes are the model's (Resolve), the run unguided, 60 samples.
func DefaultOptions() Options {
	return Options{
		NumSamples: 60, WarmupSamples: -1, MicroBatch: 1, HiddenChannels: 32,
		StepMS: 1, Cost: "sleep", Seed: 0, MinGuidance: 1, MaxGuidance: 1, GuidanceScale: 1, Goal: "throughput",
		Timeout: 60 * time.Second, HeartbeatTimeout: comm.DefaultHeartbeatTimeout, DecodeChunkSize: -1,
		Cache: cacheflag.Default(),
	}
}

// RegisterFlags binds every option to fs, with o's current values as defaults.
func (o *Options) RegisterFlags(fs *cli.FlagSet) {
	fs.StringVar(&o.Model, "model", o.Model, "the model `NAME|DIR`: synthetic (the simulator, --step-ms per step), dummy, builtin, a model folder (its model_index.json picks the family) or ORG/NAME[@REV] from the local Hugging Face cache")
	fs.StringVar(&o.ModelDir, "model-dir", o.ModelDir, `deprecated: --model svd --model-dir DIR is --model DIR`)
	fs.IntVar(&o.TotalSteps, "steps", o.TotalSteps, "denoising steps per sample (0: the model's)")
	fs.Alias("total-steps", "steps")
	fs.IntVar(&o.NumFrames, "num-frames", o.NumFrames, "video frames per sample (0: the model's)")
	fs.IntVar(&o.Height, "height", o.Height, "video height; set with --width (0 and 0: the model's)")
	fs.IntVar(&o.Width, "width", o.Width, "video width; set with --height (0 and 0: the model's)")
	fs.IntVar(&o.NumSamples, "num-samples", o.NumSamples, "samples to generate")
	fs.IntVar(&o.WarmupSamples, "warmup-samples", o.WarmupSamples, "first completions excluded from steady-state numbers (-1: 4, at most --num-samples - 2)")
	fs.IntVar(&o.MicroBatch, "micro-batch", o.MicroBatch, "samples per denoiser call (a micro-batch stays together through every stage)")
	fs.IntVar(&o.HiddenChannels, "hidden-channels", o.HiddenChannels, "dummy model hidden channels")
	fs.IntVar(&o.LatentChannels, "latent-channels", o.LatentChannels, "simulators: latent channels (0: 4; other models: their own)")
	fs.IntVar(&o.LatentFrames, "latent-frames", o.LatentFrames, "deprecated: use --num-frames (the latent's frames T; 0: from --num-frames)")
	fs.IntVar(&o.LatentHeight, "latent-height", o.LatentHeight, "deprecated: use --height (the latent's height, the video's over the VAE's factor; 0: from --height)")
	fs.IntVar(&o.LatentWidth, "latent-width", o.LatentWidth, "deprecated: use --width (the latent's width; 0: from --width)")
	fs.Deprecate("latent-frames", "--num-frames (video frames)")
	fs.Deprecate("latent-height", "--height (pixels: the latent's height times the VAE's factor)")
	fs.Deprecate("latent-width", "--width (pixels: the latent's width times the VAE's factor)")
	fs.Float64Var(&o.StepMS, "step-ms", o.StepMS, "synthetic model: cost of one sample-step in ms")
	fs.StringVar(&o.Cost, "cost", o.Cost, "synthetic model: how the cost is spent: sleep (to a deadline) or spin")
	fs.Int64Var(&o.Seed, "seed", o.Seed, "seed for noise, conditioning and dummy weights")
	fs.IntVar(&o.NProc, "nproc", o.NProc, "processes (default 7); alone it means a 7-stage pipeline")
	fs.IntVar(&o.PP, "pp", o.PP, "pipeline stages (mesh: pp x cfg x cp x dp processes)")
	fs.IntVar(&o.CFG, "cfg", o.CFG, "CFG-parallel degree: 2 runs the unconditional and conditional halves on two ranks")
	fs.IntVar(&o.CP, "cp", o.CP, "context-parallel degree: the frames of a sample split over this many ranks")
	fs.IntVar(&o.DP, "dp", o.DP, "data-parallel replicas: samples spread over this many pipelines")
	fs.StringVar(&o.Plan, "plan", o.Plan, `"auto": the planner picks the mesh for --nproc devices (see vdpp plan)`)
	fs.StringVar(&o.Goal, "goal", o.Goal, "planner goal for --plan auto: throughput or latency")
	fs.BoolVar(&o.NoBaseline, "no-baseline", o.NoBaseline, "skip the one-rank baseline run")
	fs.Float64Var(&o.MinGuidance, "min-guidance", o.MinGuidance, "SVD and simulators: guidance weight of the first frame")
	fs.Float64Var(&o.MaxGuidance, "max-guidance", o.MaxGuidance, "SVD and simulators: guidance weight of the last frame; > 1 runs classifier-free guidance")
	fs.Float64Var(&o.GuidanceScale, "guidance-scale", o.GuidanceScale, "text-to-video models (Wan): CFG scale; > 1 runs classifier-free guidance")
	fs.StringVar(&o.Schedule.Scheduler, "scheduler", o.Schedule.Scheduler, "sampler `NAME` (flow models such as Wan: unipc, euler, dpm++2m, lcm; SVD and the simulators: euler, euler-a, dpm++2m-karras; default: the folder's own)")
	fs.Float64Var(&o.Schedule.FlowShift, "flow-shift", o.Schedule.FlowShift, "flow models (Wan): the schedule's shift (0: the folder's flow_shift)")
	fs.DurationVar(&o.Timeout, "timeout", o.Timeout, "deadline for the rendezvous and every receive, counted from the last step any rank finished and extended to 4x the longest step (the one in progress included): a slow step is not a hang")
	fs.DurationVar(&o.HeartbeatTimeout, "heartbeat-timeout", o.HeartbeatTimeout, "a rank silent this long (no data, no heartbeat: killed, node or link down) ends the run, named")
	fs.StringVar(&o.JSON, "json", o.JSON, "write the report as JSON to this `FILE`")
	fs.StringVar(&o.Trace, "trace", o.Trace, "write a Chrome trace (Perfetto) to this `FILE`")
	fs.StringVar(&o.SVG, "svg", o.SVG, "write a Gantt chart SVG to this `FILE`")
	fs.StringVar(&o.Backend, "backend", o.Backend, "GoMLX backend for dummy/svd (default: GOMLX_BACKEND or go)")
	o.Weights.RegisterFlags(fs.FlagSet)
	fs.IntVar(&o.DecodeRanks, "decode-ranks", o.DecodeRanks, "decode the videos with the model's VAE on the last N stages of each pipeline (0: no decode, the denoiser only; 1: the last stage alone)")
	fs.IntVar(&o.DecodeChunkSize, "decode-chunk-size", o.DecodeChunkSize, "with --decode-ranks: frames decoded together, the parts spread over ranks (0: all; -1: the model's)")
	fs.Float64Var(&o.DecodeSteps, "decode-steps", o.DecodeSteps, "with --decode-ranks: one sample's decode cost in denoising steps; the step cut moves steps off the decoding stages to balance it, as vdpp plan does (0: cut by steps alone)")
	fs.StringVar(&o.RunDir, "run-dir", o.RunDir, "internal: where workers write results")
	fs.Hide("run-dir")
	o.Cache.Register(fs.FlagSet)
}

// knobs are the options that set a family-specific parameter, and whether each was set
// (differs from DefaultOptions): a family that does not read one refuses it.
func (o Options) knobs() []family.Knob {
	d := DefaultOptions()
	return []family.Knob{
		{Flag: "min-guidance", Param: "min_guidance", Set: o.MinGuidance != d.MinGuidance},
		{Flag: "max-guidance", Param: "max_guidance", Set: o.MaxGuidance != d.MaxGuidance},
		{Flag: "guidance-scale", Param: "guidance_scale", Set: o.GuidanceScale != d.GuidanceScale},
		{Flag: "decode-chunk-size", Param: "decode_chunk_size", Set: o.DecodeChunkSize != d.DecodeChunkSize},
	}
}

// Resolve fills what was left to the model through its family: the steps, and the latent
// [T, C, H, W] of the video's frames and size (the model's where not given). The latent
// flags, when given, are taken as they are. It checks that the model's family reads the
// family-specific flags set (Check does the same without the rest).
func (o Options) Resolve() (Options, error) {
	m, err := o.ResolveModel()
	if err != nil {
		return o, err
	}
	sh, err := plan.ResolveShape(m, o.simConfig(), plan.Shape{Steps: o.TotalSteps, NumFrames: o.NumFrames, Height: o.Height, Width: o.Width,
		LatentFrames: o.LatentFrames, LatentChannels: o.LatentChannels, LatentHeight: o.LatentHeight, LatentWidth: o.LatentWidth})
	if errors.Is(err, plan.ErrOptions) {
		return o, badOptions("%w", err)
	} else if err != nil {
		return o, err
	}
	o.TotalSteps, o.NumFrames, o.Height, o.Width = sh.Steps, sh.NumFrames, sh.Height, sh.Width
	o.LatentFrames, o.LatentChannels, o.LatentHeight, o.LatentWidth = sh.LatentFrames, sh.LatentChannels, sh.LatentHeight, sh.LatentWidth
	return o, nil
}

// Check refuses a family-specific flag the model's family does not read.
func (o Options) Check() error {
	m, err := o.ResolveModel()
	if err != nil {
		return err
	}
	model := o.Model
	if o.ModelDir != "" {
		model = o.ModelDir
	}
	if err := family.RefuseUnread(m.Family, model, o.knobs()); err != nil {
		return badOptions("%w", err)
	}
	desc, err := m.Describe()
	if err != nil {
		return err
	}
	if err := desc.CheckScheduler(o.Schedule); err != nil {
		return badOptions("--scheduler %q --flow-shift %v: %w", o.Schedule.Scheduler, o.Schedule.FlowShift, err)
	}
	return nil
}

// schedParams are the parameters the family's scheduler is built from.
func (o Options) schedParams() family.Params {
	return family.Params{Steps: o.TotalSteps, SchedulerChoice: o.Schedule}
}

// simConfig is the simulators' configuration from the options.
func (o Options) simConfig() model.Config {
	return model.Config{StepMS: o.StepMS, Cost: o.Cost, HiddenChannels: o.HiddenChannels, LatentChannels: o.LatentChannels, Seed: o.Seed}
}

// WorkerArgs renders the options as the flags of `vdpp worker bench`: every flag of
// RegisterFlags, generated from the flag set (parsing them gives o back).
func (o Options) WorkerArgs() []string {
	fs := cli.New("worker bench", nil, nil)
	c := o
	c.RegisterFlags(fs)
	return fs.AsArgs()
}

// ResolveMesh fills the mesh degrees: none given means a pure pipeline of --nproc (default
// 7) stages; otherwise unset degrees are 1, except pp, which takes what --nproc leaves.
// The product is the number of processes; a --nproc that disagrees is an error.
func (o Options) ResolveMesh() (Options, error) {
	o.WarmupSamples = o.Warmup()
	m, err := comm.MeshFromFlags(o.NProc, o.PP, o.CFG, o.CP, o.DP, 7)
	if err != nil {
		return o, badOptions("%w", err)
	}
	o.PP, o.CFG, o.CP, o.DP, o.NProc = m.PP, m.CFG, m.CP, m.DP, m.Size()
	if o.CFG == 2 && !o.Guided() {
		o.MaxGuidance = 3 // --cfg 2 means a guided run; SVD's default last-frame weight
	}
	return o, nil
}

// Warmup is --warmup-samples, with -1 resolved: 4, but at most --num-samples - 2 so that
// a short run keeps the two completions a steady interval needs.
func (o Options) Warmup() int {
	if o.WarmupSamples >= 0 {
		return o.WarmupSamples
	}
	return max(0, min(4, o.NumSamples-2))
}

// Validate checks resolved options (see ResolveMesh) before any process starts.
func (o Options) Validate() error {
	switch {
	case o.NProc < 1 || o.PP < 1 || o.CFG < 1 || o.CP < 1 || o.DP < 1:
		return badOptions("mesh pp %d x cfg %d x cp %d x dp %d (%d processes): every degree must be at least 1", o.PP, o.CFG, o.CP, o.DP, o.NProc)
	case o.PP*o.CFG*o.CP*o.DP != o.NProc:
		return badOptions("--nproc %d but --pp %d x --cfg %d x --cp %d x --dp %d = %d processes", o.NProc, o.PP, o.CFG, o.CP, o.DP, o.PP*o.CFG*o.CP*o.DP)
	case o.CFG > 2:
		return badOptions("--cfg %d: guidance has two halves (use 1 or 2)", o.CFG)
	case o.CP > o.LatentFrames:
		return badOptions("--cp %d > the latent's %d frames: every cp rank needs a frame", o.CP, o.LatentFrames)
	case o.TotalSteps < o.PP:
		return badOptions("--steps %d < %d pipeline stages: every stage needs at least one step", o.TotalSteps, o.PP)
	case o.NumSamples < 1:
		return badOptions("--num-samples %d: need at least 1", o.NumSamples)
	case o.WarmupSamples < 0 || o.WarmupSamples >= o.NumSamples:
		return badOptions("--warmup-samples %d must be in [0, --num-samples %d)", o.WarmupSamples, o.NumSamples)
	case o.MicroBatch < 1:
		return badOptions("--micro-batch %d: need at least 1", o.MicroBatch)
	case o.LatentChannels < 1 || o.LatentFrames < 1 || o.LatentHeight < 1 || o.LatentWidth < 1:
		return badOptions("latent [1,%d,%d,%d,%d] has an empty dimension", o.LatentFrames, o.LatentChannels, o.LatentHeight, o.LatentWidth)
	case o.DecodeSteps < 0 || math.IsNaN(o.DecodeSteps) || math.IsInf(o.DecodeSteps, 0):
		return badOptions("--decode-steps %v must be a finite cost >= 0", o.DecodeSteps)
	case o.DecodeRanks < 0 || o.DecodeRanks > o.PP:
		return badOptions("--decode-ranks %d must be between 0 and the %d pipeline stages", o.DecodeRanks, o.PP)
	case o.DecodeRanks > 0 && (o.CFG > 1 || o.CP > 1):
		return badOptions("--decode-ranks with --cfg %d --cp %d: decoding is wired for pp x dp meshes", o.CFG, o.CP)
	case o.StepMS < 0:
		return badOptions("--step-ms %v is negative", o.StepMS)
	case o.Timeout <= 0:
		return badOptions("--timeout %v must be positive", o.Timeout)
	}
	if _, err := o.Cache.Rule(); err != nil {
		return badOptions("%w", err)
	}
	return nil
}

// CacheRule is the run's step cache rule, resolved for m (its modes and expert switches)
// and --total-steps; the zero rule without --cache.
func (o Options) CacheRule(m family.Resolved) (pipeline.Cache, error) {
	rule, err := o.Cache.Rule()
	if err == nil {
		rule, err = m.ResolveCache(rule, o.TotalSteps)
	}
	if err != nil {
		return pipeline.Cache{}, fmt.Errorf("bench: %w", err)
	}
	return rule, nil
}

// StagePlan is the run's stage plan on stages stages: the family's (a boundary at every
// denoiser switch), cut by computed work under a static cache.
func (o Options) StagePlan(m family.Resolved, stages int) ([]pipeline.Range, error) {
	rule, err := o.CacheRule(m)
	if err != nil {
		return nil, err
	}
	return m.CachedStagePlan(rule, o.TotalSteps, o.LatentShape(), stages, o.StageExtras(stages))
}

// ResolveModel resolves --model through model/family: a simulator name, builtin or a
// model folder (the deprecated --model svd --model-dir DIR names the folder DIR).
func (o Options) ResolveModel() (family.Resolved, error) {
	switch {
	case o.ModelDir != "":
		return family.Resolve(o.ModelDir)
	case o.Model == "":
		return family.Resolved{}, badOptions("--model is required: synthetic (the simulator; --step-ms sets its step cost), dummy, builtin or a model folder")
	}
	return family.Resolve(o.Model)
}

// LatentShape is the per-sample latent [T, C, H, W].
func (o Options) LatentShape() []int {
	return []int{o.LatentFrames, o.LatentChannels, o.LatentHeight, o.LatentWidth}
}

// Guided reports whether the run uses classifier-free guidance.
func (o Options) Guided() bool { return o.MaxGuidance > 1 || o.GuidanceScale > 1 }

// GuidanceWeights are the per-frame guidance weights of a guided run over frames latent
// frames: SVD's ramp from --min-guidance to --max-guidance, or --guidance-scale on every
// frame; nil unguided.
func (o Options) GuidanceWeights(frames int) []float32 {
	switch {
	case o.MaxGuidance > 1:
		return sched.GuidanceWeights(float32(o.MinGuidance), float32(o.MaxGuidance), frames)
	case o.GuidanceScale > 1:
		w := make([]float32, frames)
		for i := range w {
			w[i] = float32(o.GuidanceScale)
		}
		return w
	}
	return nil
}

// StageExtras is each of stages stages' fixed cost per item in steps, which the step cut
// balances: the micro-batch's decode (--decode-steps per sample) shared by the decoding
// stages; nil without a decode or a decode cost.
func (o Options) StageExtras(stages int) []float64 {
	if o.DecodeRanks == 0 {
		return nil
	}
	return pipeline.StageExtras(stages, 0, 0, float64(o.MicroBatch)*o.DecodeSteps, o.DecodeRanks)
}
