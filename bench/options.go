package bench

import (
	"flag"
	"fmt"
	"github.com/vdpp/vdpp/comm"
	"math"
	"strconv"
	"time"

	"github.com/vdpp/vdpp/internal/cacheflag"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/pipeline"
)

// Options are the flags of `vdpp bench`; the same set is passed to every worker.
type Options struct {
	Model          string
	ModelDir       string
	TotalSteps     int
	NumSamples     int
	WarmupSamples  int
	MicroBatch     int
	HiddenChannels int
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
	MinGuidance    float64
	GuidanceScale  float64
	Timeout        time.Duration
	// HeartbeatTimeout is how long a rank may hear nothing from another (not even a
	// heartbeat) before the run ends, naming the lost rank and its node (0: the default,
	// comm.DefaultHeartbeatTimeout).
	HeartbeatTimeout time.Duration
	JSON             string
	Trace            string
	SVG              string
	Backend          string

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

// DefaultOptions are the values `vdpp bench` uses when a flag is not given: the simulator
// at the grain of the engine issue's first target.
func DefaultOptions() Options {
	return Options{
		Model: "synthetic", TotalSteps: 28, NumSamples: 60, WarmupSamples: 4, MicroBatch: 1,
		HiddenChannels: 32, LatentChannels: 4, LatentFrames: 4, LatentHeight: 16, LatentWidth: 16,
		StepMS: 1, Cost: "sleep", Seed: 0, MinGuidance: 1, GuidanceScale: 1, Goal: "throughput",
		Timeout: 60 * time.Second, HeartbeatTimeout: comm.DefaultHeartbeatTimeout, DecodeChunkSize: -1,
		Cache: cacheflag.Default(),
	}
}

// RegisterFlags binds every option to fs, with o's current values as defaults.
func (o *Options) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Model, "model", o.Model, `model: synthetic, dummy, builtin or a model folder (its model_index.json picks the family)`)
	fs.StringVar(&o.ModelDir, "model-dir", o.ModelDir, `deprecated: --model svd --model-dir DIR is --model DIR`)
	fs.IntVar(&o.TotalSteps, "total-steps", o.TotalSteps, "denoising steps per sample")
	fs.IntVar(&o.NumSamples, "num-samples", o.NumSamples, "samples to generate")
	fs.IntVar(&o.WarmupSamples, "warmup-samples", o.WarmupSamples, "first completions excluded from steady-state numbers")
	fs.IntVar(&o.MicroBatch, "micro-batch", o.MicroBatch, "samples per denoiser call (a micro-batch stays together through every stage)")
	fs.IntVar(&o.HiddenChannels, "hidden-channels", o.HiddenChannels, "dummy model hidden channels")
	fs.IntVar(&o.LatentChannels, "latent-channels", o.LatentChannels, "latent channels C")
	fs.IntVar(&o.LatentFrames, "latent-frames", o.LatentFrames, "latent frames T")
	fs.IntVar(&o.LatentHeight, "latent-height", o.LatentHeight, "latent height H")
	fs.IntVar(&o.LatentWidth, "latent-width", o.LatentWidth, "latent width W")
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
	fs.Float64Var(&o.MinGuidance, "min-guidance", o.MinGuidance, "guidance weight of the first frame (guided runs)")
	fs.Float64Var(&o.GuidanceScale, "guidance-scale", o.GuidanceScale, "guidance weight of the last frame; > 1 runs classifier-free guidance")
	fs.DurationVar(&o.Timeout, "timeout", o.Timeout, "deadline for the rendezvous and every receive, counted from the last step any rank finished and extended to 4x the longest step (the one in progress included): a slow step is not a hang")
	fs.DurationVar(&o.HeartbeatTimeout, "heartbeat-timeout", o.HeartbeatTimeout, "a rank silent this long (no data, no heartbeat: killed, node or link down) ends the run, named")
	fs.StringVar(&o.JSON, "json", o.JSON, "write the report as JSON to this file")
	fs.StringVar(&o.Trace, "trace", o.Trace, "write a Chrome trace (Perfetto) to this file")
	fs.StringVar(&o.SVG, "svg", o.SVG, "write a Gantt chart SVG to this file")
	fs.StringVar(&o.Backend, "backend", o.Backend, "GoMLX backend for dummy/svd (default: GOMLX_BACKEND or go)")
	fs.IntVar(&o.DecodeRanks, "decode-ranks", o.DecodeRanks, "decode the videos with the model's VAE on the last N stages of each pipeline (0: no decode, the denoiser only; 1: the last stage alone)")
	fs.IntVar(&o.DecodeChunkSize, "decode-chunk-size", o.DecodeChunkSize, "with --decode-ranks: frames decoded together, the parts spread over ranks (0: all; -1: the model's)")
	fs.Float64Var(&o.DecodeSteps, "decode-steps", o.DecodeSteps, "with --decode-ranks: one sample's decode cost in denoising steps; the step cut moves steps off the decoding stages to balance it, as vdpp plan does (0: cut by steps alone)")
	fs.StringVar(&o.RunDir, "run-dir", o.RunDir, "internal: where workers write results")
	o.Cache.Register(fs)
}

// WorkerArgs renders the options as flags for `vdpp worker bench`.
func (o Options) WorkerArgs() []string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	args := []string{
		"--model=" + o.Model, "--model-dir=" + o.ModelDir,
		"--total-steps=" + strconv.Itoa(o.TotalSteps), "--num-samples=" + strconv.Itoa(o.NumSamples),
		"--warmup-samples=" + strconv.Itoa(o.WarmupSamples), "--micro-batch=" + strconv.Itoa(o.MicroBatch),
		"--hidden-channels=" + strconv.Itoa(o.HiddenChannels), "--latent-channels=" + strconv.Itoa(o.LatentChannels),
		"--latent-frames=" + strconv.Itoa(o.LatentFrames), "--latent-height=" + strconv.Itoa(o.LatentHeight),
		"--latent-width=" + strconv.Itoa(o.LatentWidth), "--step-ms=" + f(o.StepMS), "--cost=" + o.Cost,
		"--seed=" + strconv.FormatInt(o.Seed, 10), "--nproc=" + strconv.Itoa(o.NProc),
		"--pp=" + strconv.Itoa(o.PP), "--cfg=" + strconv.Itoa(o.CFG), "--cp=" + strconv.Itoa(o.CP), "--dp=" + strconv.Itoa(o.DP),
		"--min-guidance=" + f(o.MinGuidance), "--guidance-scale=" + f(o.GuidanceScale),
		"--timeout=" + o.Timeout.String(), "--heartbeat-timeout=" + o.HeartbeatTimeout.String(), "--backend=" + o.Backend, "--run-dir=" + o.RunDir,
		"--decode-ranks=" + strconv.Itoa(o.DecodeRanks), "--decode-chunk-size=" + strconv.Itoa(o.DecodeChunkSize),
		"--decode-steps=" + f(o.DecodeSteps),
	}
	return append(args, o.Cache.Args()...)
}

// ResolveMesh fills the mesh degrees: none given means a pure pipeline of --nproc (default
// 7) stages; otherwise unset degrees are 1, except pp, which takes what --nproc leaves.
// The product is the number of processes; a --nproc that disagrees is an error.
func (o Options) ResolveMesh() (Options, error) {
	if o.PP == 0 && o.CFG == 0 && o.CP == 0 && o.DP == 0 {
		if o.NProc == 0 {
			o.NProc = 7
		}
		o.PP, o.CFG, o.CP, o.DP = o.NProc, 1, 1, 1
		return o, nil
	}
	one := func(v *int) {
		if *v == 0 {
			*v = 1
		}
	}
	one(&o.CFG)
	one(&o.CP)
	one(&o.DP)
	if o.PP == 0 {
		o.PP = 1
		if rest := o.CFG * o.CP * o.DP; o.NProc > 0 && o.NProc%rest == 0 {
			o.PP = o.NProc / rest
		}
	}
	world := o.PP * o.CFG * o.CP * o.DP
	if o.NProc != 0 && o.NProc != world {
		return o, fmt.Errorf("bench: --nproc %d but --pp %d x --cfg %d x --cp %d x --dp %d = %d processes", o.NProc, o.PP, o.CFG, o.CP, o.DP, world)
	}
	o.NProc = world
	if o.CFG == 2 && !o.Guided() {
		o.GuidanceScale = 3 // --cfg 2 means a guided run; SVD's default last-frame weight
	}
	return o, nil
}

// Validate checks resolved options (see ResolveMesh) before any process starts.
func (o Options) Validate() error {
	switch {
	case o.NProc < 1 || o.PP < 1 || o.CFG < 1 || o.CP < 1 || o.DP < 1:
		return fmt.Errorf("bench: mesh pp %d x cfg %d x cp %d x dp %d (%d processes): every degree must be at least 1", o.PP, o.CFG, o.CP, o.DP, o.NProc)
	case o.PP*o.CFG*o.CP*o.DP != o.NProc:
		return fmt.Errorf("bench: --nproc %d but --pp %d x --cfg %d x --cp %d x --dp %d = %d processes", o.NProc, o.PP, o.CFG, o.CP, o.DP, o.PP*o.CFG*o.CP*o.DP)
	case o.CFG > 2:
		return fmt.Errorf("bench: --cfg %d: guidance has two halves (use 1 or 2)", o.CFG)
	case o.CP > o.LatentFrames:
		return fmt.Errorf("bench: --cp %d > --latent-frames %d", o.CP, o.LatentFrames)
	case o.TotalSteps < o.PP:
		return fmt.Errorf("bench: --total-steps %d < %d pipeline stages: %w", o.TotalSteps, o.PP, pipeline.ErrBadPlan)
	case o.NumSamples < 1:
		return fmt.Errorf("bench: --num-samples %d: need at least 1", o.NumSamples)
	case o.WarmupSamples < 0 || o.WarmupSamples >= o.NumSamples:
		return fmt.Errorf("bench: --warmup-samples %d must be in [0, --num-samples %d)", o.WarmupSamples, o.NumSamples)
	case o.MicroBatch < 1:
		return fmt.Errorf("bench: --micro-batch %d: need at least 1", o.MicroBatch)
	case o.LatentChannels < 1 || o.LatentFrames < 1 || o.LatentHeight < 1 || o.LatentWidth < 1:
		return fmt.Errorf("bench: latent [1,%d,%d,%d,%d] has an empty dimension", o.LatentFrames, o.LatentChannels, o.LatentHeight, o.LatentWidth)
	case o.DecodeSteps < 0 || math.IsNaN(o.DecodeSteps) || math.IsInf(o.DecodeSteps, 0):
		return fmt.Errorf("bench: --decode-steps %v must be a finite cost >= 0", o.DecodeSteps)
	case o.DecodeRanks < 0 || o.DecodeRanks > o.PP:
		return fmt.Errorf("bench: --decode-ranks %d must be between 0 and the %d pipeline stages", o.DecodeRanks, o.PP)
	case o.DecodeRanks > 0 && (o.CFG > 1 || o.CP > 1):
		return fmt.Errorf("bench: --decode-ranks with --cfg %d --cp %d: decoding is wired for pp x dp meshes", o.CFG, o.CP)
	case o.StepMS < 0:
		return fmt.Errorf("bench: --step-ms %v is negative", o.StepMS)
	case o.Timeout <= 0:
		return fmt.Errorf("bench: --timeout %v must be positive", o.Timeout)
	}
	if _, err := o.Cache.Rule(); err != nil {
		return fmt.Errorf("bench: %w", err)
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
	if o.ModelDir != "" {
		return family.Resolve(o.ModelDir)
	}
	return family.Resolve(o.Model)
}

// LatentShape is the per-sample latent [T, C, H, W].
func (o Options) LatentShape() []int {
	return []int{o.LatentFrames, o.LatentChannels, o.LatentHeight, o.LatentWidth}
}

// Guided reports whether the run uses classifier-free guidance.
func (o Options) Guided() bool { return o.GuidanceScale > 1 }

// StageExtras is each of stages stages' fixed cost per item in steps, which the step cut
// balances: the micro-batch's decode (--decode-steps per sample) shared by the decoding
// stages; nil without a decode or a decode cost.
func (o Options) StageExtras(stages int) []float64 {
	if o.DecodeRanks == 0 {
		return nil
	}
	return pipeline.StageExtras(stages, 0, 0, float64(o.MicroBatch)*o.DecodeSteps, o.DecodeRanks)
}
