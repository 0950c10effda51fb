// Package generate is `vdpp generate`: an image (SVD) or a prompt (Wan) in, videos out,
// on a pp x cfg x cp x dp mesh of processes (a K-stage step pipeline by default). Stage 0
// loads the conditioner (SVD's image encoder and VAE encoder; Wan's tokenizer and text
// encoder, with --prompt) with its denoiser and computes each sample's conditioning once;
// middle stages load only the denoiser; the last stage loads the denoiser and the VAE
// decoder and writes, per sample, video.gif, video.mp4, frames/NNN.png and report.json into
// an output folder no other run writes to (PrepareOut). Each rank reports its progress to
// the launching process, which shows the steps done, the rate and the time left.
//
// Contract: the same seed gives bit-identical frames with 1 process or any pp, dp or cfg
// mesh (sample s draws its noise from a stream keyed by (seed, s); batch composition does
// not depend on the mesh); a cp mesh agrees to float rounding (its split temporal layers
// sum in another order). Bad input (a missing or non-image file, a missing config, a
// corrupt or mis-shaped checkpoint, impossible sizes, a flag the model's family does not
// read) is reported before any worker starts, as one line naming the flag or the file.
package generate

import (
	"fmt"
	"math"
	"time"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/internal/cacheflag"
	"github.com/vdpp/vdpp/internal/cli"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/lora"
	"github.com/vdpp/vdpp/pipeline"
)

// ErrOptions marks invalid command-line options; it is a command-line mistake
// (cli.ErrUsage).
var ErrOptions = fmt.Errorf("generate: bad options: %w", cli.ErrUsage)

// badOptions is an error about the options, ErrOptions, whose message is fmt.Errorf's.
func badOptions(format string, a ...any) error { return cli.Errorf(ErrOptions, format, a...) }

// Options are the flags of `vdpp generate` (0 means the model's default: SVD's pipeline
// defaults and the checkpoint's frame count and size; WanPipeline's for Wan).
type Options struct {
	Model   string // checkpoint folder
	Variant string
	// Weights say where the denoiser's weights come from and the type they are held in
	// (--weights-dtype, --transformer, --transformer-2, --unet).
	Weights family.WeightOptions
	// Image is the image of an image-to-video model (SVD; a Wan image-to-video folder, with
	// its prompt); LastImage the last frame's image of a model that takes one (Wan
	// first-last-frame).
	Image     string
	LastImage string
	// Prompt and NegativePrompt are the text of a text-to-video model (Wan), encoded by
	// its text encoder on the first stage.
	Prompt         string
	NegativePrompt string
	// PromptEmbeds and NegativePromptEmbeds are safetensors files of prompt embeddings
	// for text-to-video families (Wan), in place of Prompt and NegativePrompt.
	PromptEmbeds         string
	NegativePromptEmbeds string
	// GuidanceScale (-1: the model's) and GuidanceScale2 (0: the same) are the CFG scales
	// of text-to-video families; GuidanceScale2 is the low-noise expert's.
	GuidanceScale  float64
	GuidanceScale2 float64
	// Scheduler is the sampler ("": the folder's own; Resolve fills it in) and FlowShift a
	// flow model's shift (0: the folder's; Resolve fills it in).
	Scheduler string
	FlowShift float64
	// LoRA and LoRA2 are LoRA files and strengths merged into the denoisers as they load:
	// LoRA into every denoiser, or, with LoRA2, into the first expert and LoRA2 into the
	// second (family.LoRAs). Resolve makes the paths absolute.
	LoRA, LoRA2 []lora.Spec
	NumFrames   int
	// Window, Overlap and Blend cut a video longer than the model's native frame count
	// into overlapping temporal windows denoised together, in video frames mapped to the
	// latent frames they cut (Wan: a window of 1 + 4k frames, an overlap a multiple of 4;
	// 0 window, -1 overlap, "" blend: the family's defaults, see family.Windowing).
	Window           int
	Overlap          int
	Blend            string
	Steps            int
	Height, Width    int
	MinGuidance      float64
	MaxGuidance      float64
	FPS              int
	MotionBucketID   int
	NoiseAugStrength float64
	DecodeChunkSize  int
	VAETile          int
	Seed             int64
	NumSamples       int
	MicroBatch       int
	// NProc is the number of processes: a pipeline of NProc stages, or the product of the
	// mesh degrees PP x CFG x CP x DP when any is given (0: the product); ResolveMesh fills
	// them all. Plan "auto" lets the planner pick the mesh for NProc devices (Goal:
	// throughput or latency), as `vdpp bench --plan auto` does.
	NProc           int
	PP, CFG, CP, DP int
	Plan            string
	Goal            string
	// Out is the output folder ("": a fresh numbered folder under out/, see PrepareOut);
	// Overwrite lets a run replace an earlier run's samples there.
	Out       string
	Overwrite bool
	Backend   string
	Timeout   time.Duration
	// HeartbeatTimeout is how long a rank may hear nothing from another (not even a
	// heartbeat) before the job ends, naming the lost rank and its node (0: the default,
	// comm.DefaultHeartbeatTimeout).
	HeartbeatTimeout time.Duration
	Progress         string // "auto", "bar" or "plain"
	// Quiet shows no progress and sends the logs to OUT/generate.log: only errors and
	// the sample folders are printed.
	Quiet bool
	// ProgressDir is where each rank writes its progress report for the launching
	// process's display (set by Runner.Run; "" writes none).
	ProgressDir string
	// DecodeRanks is how many ranks share the decoding: the last stage and the stages
	// before it (0 or 1: the last stage alone); see docs/long-video.md.
	DecodeRanks int
	// DecodeSteps is one sample's decode cost in denoising steps: the step cut balances it
	// against the steps of the decoding stages, as vdpp plan does (pipeline.StageExtras);
	// 0 cuts by steps alone.
	DecodeSteps float64
	// ConditionSteps is one sample's conditioning cost (image or text encoder, stage 0) in
	// denoising steps, balanced on the first stage the same way; 0 leaves it out.
	ConditionSteps float64
	// Cache is the step cache (--cache and its flags, docs/caching.md).
	Cache cacheflag.Flags
	// ModelName is --model as the user gave it ("builtin-wan"), kept when Resolve puts the
	// model's folder in Model: the report names the model by it.
	ModelName string
	// FromReport is a report.json whose job this run repeats (ExpandFromReport puts its
	// job's flags before the command line's).
	FromReport string
	// CacheCheck runs the same job again without the cache after a cached run and scores
	// the cached videos against the uncached ones (PSNR, SSIM), with the time measured
	// both ways, in the cache line and report.json.
	CacheCheck bool
}

// DefaultOptions mirrors the pipeline's defaults; sizes, frames and steps left at 0 come from
// the model (Resolve).
func DefaultOptions() Options {
	return Options{
		MinGuidance: -1, MaxGuidance: -1, GuidanceScale: -1, MotionBucketID: -1, NoiseAugStrength: -1,
		DecodeChunkSize: -1, Overlap: -1, NumSamples: 1, MicroBatch: 1, NProc: 1, Goal: "throughput",
		Timeout: 10 * time.Minute, HeartbeatTimeout: comm.DefaultHeartbeatTimeout, Progress: "auto", Cache: cacheflag.Default(),
	}
}

// RegisterFlags binds the options to fs, with o's current values as defaults.
func (o *Options) RegisterFlags(fs *cli.FlagSet) {
	fs.StringVar(&o.Model, "model", o.Model, "the model `NAME|DIR`: \"builtin\" (SVD), \"builtin-wan\" (Wan, --prompt), a diffusers folder (its model_index.json picks the family) or ORG/NAME[@REV] from the local Hugging Face cache")
	fs.StringVar(&o.Variant, "variant", o.Variant, `weights variant, e.g. "fp16" (converted to float32)`)
	o.Weights.RegisterFlags(fs.FlagSet)
	fs.StringVar(&o.Image, "image", o.Image, "input `FILE` (PNG or JPEG) of an image-to-video model (SVD, Wan I2V; optional for Wan TI2V)")
	fs.StringVar(&o.LastImage, "last-image", o.LastImage, "last frame's image `FILE` of a model that takes one (Wan first-last-frame; optional for Wan 2.2 I2V)")
	fs.StringVar(&o.Prompt, "prompt", o.Prompt, "`TEXT` of a text-to-video model (Wan), encoded by the folder's text_encoder/ and tokenizer/")
	fs.StringVar(&o.NegativePrompt, "negative-prompt", o.NegativePrompt, "negative prompt `TEXT`, the unconditional half of CFG (default \"\")")
	fs.StringVar(&o.PromptEmbeds, "prompt-embeds", o.PromptEmbeds, "safetensors `FILE` of prompt embeddings [L, text_dim] or [1, L, text_dim] for a text-to-video model (Wan)")
	fs.StringVar(&o.NegativePromptEmbeds, "negative-prompt-embeds", o.NegativePromptEmbeds, "safetensors `FILE` of negative prompt embeddings (needed when --guidance-scale > 1)")
	fs.Float64Var(&o.GuidanceScale, "guidance-scale", o.GuidanceScale, "CFG scale of a text-to-video model (Wan), > 1 turns on CFG (-1: the model's, 5 for Wan)")
	fs.Float64Var(&o.GuidanceScale2, "guidance-scale-2", o.GuidanceScale2, "CFG scale of a two-expert model's low-noise expert (0: --guidance-scale)")
	fs.StringVar(&o.Scheduler, "scheduler", o.Scheduler, "sampler `NAME`: flow models (Wan) unipc, euler, dpm++2m, lcm; SVD euler, euler-a, dpm++2m-karras (default: the folder's own; docs/schedulers.md)")
	fs.Float64Var(&o.FlowShift, "flow-shift", o.FlowShift, "flow models (Wan): the schedule's shift (0: the folder's flow_shift)")
	fs.Var(lora.Flag{Specs: &o.LoRA}, "lora", "LoRA `FILE[:STRENGTH]` merged into the denoiser(s) at load, repeatable (strength 1 by default; docs/lora.md)")
	fs.Var(lora.Flag{Specs: &o.LoRA2}, "lora-2", "LoRA `FILE[:STRENGTH]` of a two-expert model's second (low-noise) expert, repeatable; given, --lora is the first expert's only")
	fs.IntVar(&o.NumFrames, "num-frames", o.NumFrames, "frames (0: the model's: SVD the UNet config's num_frames, 14 for builtin; Wan 81, WanPipeline's default, very slow on a CPU, 17 for builtin-wan)")
	fs.IntVar(&o.Window, "window", o.Window, "frames per temporal window when --num-frames exceeds it (0: the model's native frame count; Wan: 1 + 4k)")
	fs.IntVar(&o.Overlap, "overlap", o.Overlap, "frames shared by neighbouring windows, blended at every step (-1: the family's, a quarter of the window; Wan: a multiple of 4)")
	fs.StringVar(&o.Blend, "blend", o.Blend, `blend of the overlapping frames: linear or cosine ("": cosine)`)
	fs.IntVar(&o.Steps, "steps", o.Steps, "denoising steps (0: the model's: 25 for SVD and builtin; Wan 50, WanPipeline's default, 20 for builtin-wan)")
	fs.IntVar(&o.Height, "height", o.Height, "video height, a multiple of the VAE's factor; set with --width (0 and 0: the model's: SVD 576 for the released checkpoints, 64 for builtin; Wan 480, 96 for builtin-wan)")
	fs.IntVar(&o.Width, "width", o.Width, "video width; set with --height (0 and 0: the model's: SVD 1024 for the released checkpoints, 64 for builtin; Wan 832, 160 for builtin-wan)")
	fs.Float64Var(&o.MinGuidance, "min-guidance", o.MinGuidance, "SVD: guidance weight of the first frame (-1: the model's vdpp_sampling.json: 2 for builtin; 1, as SVD, for a folder without one)")
	fs.Float64Var(&o.MaxGuidance, "max-guidance", o.MaxGuidance, "SVD: guidance weight of the last frame, > 1 turns on CFG (-1: the model's vdpp_sampling.json: 4 for builtin; 3, as SVD, for a folder without one)")
	fs.IntVar(&o.FPS, "fps", o.FPS, "frames per second of the videos, SVD also conditions on it (0: the model's: SVD 7, Wan 16 as diffusers' export)")
	fs.IntVar(&o.MotionBucketID, "motion-bucket-id", o.MotionBucketID, "SVD: motion conditioning (-1: the model's, 127)")
	fs.Float64Var(&o.NoiseAugStrength, "noise-aug-strength", o.NoiseAugStrength, "SVD: noise added to the conditioning image (-1: the model's, 0.02)")
	fs.IntVar(&o.DecodeChunkSize, "decode-chunk-size", o.DecodeChunkSize, "SVD: frames decoded at once (0: all; -1: the model's vdpp_sampling.json: 7 for builtin; all for a folder without one)")
	fs.IntVar(&o.DecodeRanks, "decode-ranks", o.DecodeRanks, "ranks that share the VAE decode: the last stage and the N-1 before it (0 or 1: the last stage alone); bit-identical")
	fs.Float64Var(&o.DecodeSteps, "decode-steps", o.DecodeSteps, "one sample's decode cost in denoising steps; the step cut moves steps off the decoding stages to balance it, as vdpp plan does (0: cut by steps alone); bit-identical")
	fs.Float64Var(&o.ConditionSteps, "condition-steps", o.ConditionSteps, "one sample's conditioning cost (stage 0's image or text encoder) in denoising steps; the step cut moves steps off stage 0 to balance it (0: not counted)")
	fs.IntVar(&o.VAETile, "vae-tile", o.VAETile, "SVD: decode (and encode) in overlapping spatial tiles of this many pixels, as diffusers' enable_tiling (0: whole frames; -1: the VAE's sample_size)")
	fs.Int64Var(&o.Seed, "seed", o.Seed, "seed; sample s uses the stream (seed, s)")
	fs.IntVar(&o.NumSamples, "num-samples", o.NumSamples, "videos to generate")
	fs.IntVar(&o.MicroBatch, "micro-batch", o.MicroBatch, "samples per denoiser call")
	fs.IntVar(&o.NProc, "nproc", o.NProc, "processes: alone, a pipeline of that many stages; with --pp --cfg --cp --dp, their product (checked)")
	fs.IntVar(&o.PP, "pp", o.PP, "pipeline stages (mesh: pp x cfg x cp x dp processes; unset: what --nproc leaves)")
	fs.IntVar(&o.CFG, "cfg", o.CFG, "CFG-parallel degree: 2 runs the unconditional and conditional halves of a guided run on two ranks")
	fs.IntVar(&o.CP, "cp", o.CP, "context-parallel degree: the latent frames of a sample split over this many ranks")
	fs.IntVar(&o.DP, "dp", o.DP, "data-parallel replicas: samples spread over this many pipelines")
	fs.StringVar(&o.Plan, "plan", o.Plan, `"auto": the planner picks the mesh for --nproc devices, as vdpp plan does`)
	fs.StringVar(&o.Goal, "goal", o.Goal, "planner goal for --plan auto: throughput or latency")
	fs.StringVar(&o.Out, "out", o.Out, "output `DIR`, empty or new (default: a fresh out/run-NNN for each run)")
	fs.BoolVar(&o.Overwrite, "overwrite", o.Overwrite, "let --out name a folder holding an earlier run: its sample folders and generate.log are removed first")
	fs.StringVar(&o.Backend, "backend", o.Backend, "GoMLX backend (default: GOMLX_BACKEND or go)")
	fs.DurationVar(&o.Timeout, "timeout", o.Timeout, "deadline for every hand-off between stages, counted from the last step any rank finished and extended to 4x the longest step (the one in progress included): a slow step is not a hang")
	fs.DurationVar(&o.HeartbeatTimeout, "heartbeat-timeout", o.HeartbeatTimeout, "a rank silent this long (no data, no heartbeat: killed, node or link down) ends the job, named")
	fs.StringVar(&o.Progress, "progress", o.Progress, "progress display: auto (a bar on a terminal, else a plain line every 10 s and per sample), bar or plain")
	fs.BoolVar(&o.Quiet, "quiet", o.Quiet, "no progress display; logs go to OUT/generate.log; only errors and the sample folders are printed")
	fs.StringVar(&o.ProgressDir, "progress-dir", o.ProgressDir, "internal: where each rank writes its progress report")
	fs.Hide("progress-dir")
	o.Cache.Register(fs.FlagSet)
	fs.StringVar(&o.FromReport, FromReportFlag, o.FromReport, "re-run the job a sample's report.json `FILE` describes (the same bits on the same mesh); flags given too change it (--out, --seed)")
	fs.StringVar(&o.ModelName, "model-name", o.ModelName, "internal: --model as given")
	fs.Hide("model-name")
	fs.BoolVar(&o.CacheCheck, "cache-check", o.CacheCheck, "with --cache: run the job again without the cache and print the cached videos' PSNR/SSIM against the uncached ones and the time saved, measured (docs/caching.md)")
}

// WorkerArgs renders the options as the flags of `vdpp worker generate`: every flag of
// RegisterFlags, generated from the flag set (parsing them gives o back).
func (o Options) WorkerArgs() []string {
	fs := cli.New("worker generate", nil, nil)
	c := o
	c.RegisterFlags(fs)
	return fs.AsArgs()
}

// knobs are the options that set a family-specific generation parameter, and whether each
// differs from "the model's" (DefaultOptions): a family that does not read one refuses it.
func (o Options) knobs() []family.Knob {
	d := DefaultOptions()
	return []family.Knob{
		{Flag: "min-guidance", Param: "min_guidance", Set: o.MinGuidance != d.MinGuidance},
		{Flag: "max-guidance", Param: "max_guidance", Set: o.MaxGuidance != d.MaxGuidance},
		{Flag: "motion-bucket-id", Param: "motion_bucket_id", Set: o.MotionBucketID != d.MotionBucketID},
		{Flag: "noise-aug-strength", Param: "noise_aug_strength", Set: o.NoiseAugStrength != d.NoiseAugStrength},
		{Flag: "decode-chunk-size", Param: "decode_chunk_size", Set: o.DecodeChunkSize != d.DecodeChunkSize},
		{Flag: "vae-tile", Param: "vae_tile", Set: o.VAETile != d.VAETile},
		{Flag: "guidance-scale", Param: "guidance_scale", Set: o.GuidanceScale != d.GuidanceScale},
		{Flag: "guidance-scale-2", Param: "guidance_scale_2", Set: o.GuidanceScale2 != d.GuidanceScale2},
	}
}

// withModelDefaults fills the options left to the model (DefaultOptions' sentinels) from
// def, the model's defaults; a family-specific one the family does not read becomes def's
// (its zero), so a report shows only what ran.
func (o Options) withModelDefaults(def family.Params) Options {
	d := DefaultOptions()
	if o.MinGuidance == d.MinGuidance {
		o.MinGuidance = def.MinGuidance
	}
	if o.MaxGuidance == d.MaxGuidance {
		o.MaxGuidance = def.MaxGuidance
	}
	if o.MotionBucketID == d.MotionBucketID {
		o.MotionBucketID = def.MotionBucketID
	}
	if o.NoiseAugStrength == d.NoiseAugStrength {
		o.NoiseAugStrength = def.NoiseAugStrength
	}
	if o.DecodeChunkSize == d.DecodeChunkSize {
		o.DecodeChunkSize = def.DecodeChunkSize
	}
	if o.FPS == 0 {
		o.FPS = def.FPS
	}
	if o.NumFrames == 0 {
		o.NumFrames = def.NumFrames
	}
	if o.Steps == 0 {
		o.Steps = def.Steps
	}
	return o
}

// Validate checks what can be checked without opening files.
func (o Options) Validate() error {
	switch {
	case o.Model == "":
		return badOptions("--model is required: builtin, builtin-wan, a model folder, or ORG/NAME from the Hugging Face cache")
	case o.Image == "" && o.PromptEmbeds == "" && o.Prompt == "":
		return badOptions("--image FILE (image-to-video) or --prompt TEXT / --prompt-embeds FILE (text-to-video) is required")
	case o.LastImage != "" && o.Image == "":
		return badOptions("--last-image needs --image (the first frame's image)")
	case o.Prompt != "" && o.PromptEmbeds != "":
		return badOptions("--prompt and --prompt-embeds both given: give one")
	case o.NegativePrompt != "" && o.NegativePromptEmbeds != "":
		return badOptions("--negative-prompt and --negative-prompt-embeds both given: give one")
	case o.NegativePrompt != "" && o.Prompt == "":
		return badOptions("--negative-prompt needs --prompt (with --prompt-embeds give --negative-prompt-embeds)")
	case o.NegativePromptEmbeds != "" && o.PromptEmbeds == "":
		return badOptions("--negative-prompt-embeds needs --prompt-embeds (with --prompt give --negative-prompt)")
	case o.NumSamples < 1:
		return badOptions("--num-samples %d: the number of videos must be at least 1", o.NumSamples)
	case o.MicroBatch < 1:
		return badOptions("--micro-batch %d: a denoiser call takes at least 1 sample", o.MicroBatch)
	case o.NProc < 0 || (o.NProc == 0 && o.PP+o.CFG+o.CP+o.DP == 0 && o.Plan == ""):
		return badOptions("--nproc %d: a run needs at least 1 process (1 runs every stage here, K > 1 starts K pipeline stages)", o.NProc)
	case o.Plan != "" && o.Plan != "auto":
		return badOptions("--plan %q: only \"auto\" is known", o.Plan)
	case o.Plan == "auto" && o.PP+o.CFG+o.CP+o.DP > 0:
		return badOptions("--plan auto chooses --pp/--cfg/--cp/--dp itself; give only --nproc (the devices)")
	case o.Goal != "throughput" && o.Goal != "latency":
		return badOptions("--goal %q (want throughput or latency)", o.Goal)
	case o.DecodeRanks < 0:
		return badOptions("--decode-ranks %d must be at least 0", o.DecodeRanks)
	case o.DecodeSteps < 0 || math.IsNaN(o.DecodeSteps) || math.IsInf(o.DecodeSteps, 0):
		return badOptions("--decode-steps %v must be a finite cost >= 0", o.DecodeSteps)
	case o.ConditionSteps < 0 || math.IsNaN(o.ConditionSteps) || math.IsInf(o.ConditionSteps, 0):
		return badOptions("--condition-steps %v must be a finite cost >= 0", o.ConditionSteps)
	case o.Steps < 0:
		return badOptions("--steps %d: the number of denoising steps cannot be negative (0: the model's)", o.Steps)
	case o.Timeout <= 0:
		return badOptions("--timeout %v: the hand-off deadline must be positive", o.Timeout)
	}
	switch o.Progress {
	case "auto", "bar", "plain":
	default:
		return badOptions("--progress %q (want auto, bar or plain)", o.Progress)
	}
	rule, err := o.Cache.Rule()
	if err != nil {
		return badOptions("%w", err)
	}
	if o.CacheCheck && !rule.On() {
		return badOptions("--cache-check compares a cached run with an uncached one: give --cache MODE")
	}
	return nil
}

// StageExtras is each of the pipeline's stages' fixed cost per item in steps, which the
// step cut balances: the micro-batch's conditioning (--condition-steps per sample) on stage
// 0 and its decode (--decode-steps per sample) shared by the decoding stages; nil without
// either cost. o's mesh must be resolved (ResolveMesh).
func (o Options) StageExtras() []float64 {
	b := float64(o.MicroBatch)
	return pipeline.StageExtras(o.PP, b*o.ConditionSteps, 0, b*o.DecodeSteps, o.DecodeRanks)
}

// ResolveMesh fills the mesh from --nproc, --pp, --cfg, --cp and --dp (comm.MeshFromFlags:
// none given, a pipeline of --nproc stages) and checks what the mesh needs: a step per
// stage, a guided run for --cfg 2, decode ranks within the pipeline.
func (o Options) ResolveMesh() (Options, error) {
	m, err := comm.MeshFromFlags(o.NProc, o.PP, o.CFG, o.CP, o.DP, 1)
	if err != nil {
		return o, badOptions("%w", err)
	}
	o.PP, o.CFG, o.CP, o.DP, o.NProc = m.PP, m.CFG, m.CP, m.DP, m.Size()
	switch {
	case o.CFG > 2:
		return o, badOptions("--cfg %d: classifier-free guidance has two halves (use 1 or 2)", o.CFG)
	case o.CFG == 2 && !o.guided():
		return o, badOptions("--cfg 2 runs the two halves of classifier-free guidance on two ranks, but this run is not guided (--max-guidance or --guidance-scale above 1)")
	case o.Steps > 0 && o.Steps < o.PP:
		return o, badOptions("--steps %d cannot fill %d pipeline stages: every stage needs at least one step", o.Steps, o.PP)
	case o.DecodeRanks > o.PP:
		return o, badOptions("--decode-ranks %d must be at most the %d pipeline stages", o.DecodeRanks, o.PP)
	case o.DecodeRanks > 1 && (o.CFG > 1 || o.CP > 1):
		return o, badOptions("--decode-ranks %d with --cfg %d --cp %d: a decode is spread over pp x dp meshes only", o.DecodeRanks, o.CFG, o.CP)
	}
	return o, nil
}

// guided reports whether the resolved options run classifier-free guidance.
func (o Options) guided() bool { return o.MaxGuidance > 1 || o.GuidanceScale > 1 }

// mesh names the options' mesh, for messages.
func (o Options) mesh() string { return comm.Mesh{PP: o.PP, CFG: o.CFG, CP: o.CP, DP: o.DP}.String() }
