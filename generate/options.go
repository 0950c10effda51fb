// Package generate is `vdpp generate`: an image (SVD) or a prompt (Wan) in, videos out,
// through the K-stage step pipeline. Stage 0 loads the conditioner (SVD's image encoder and
// VAE encoder; Wan's tokenizer and text encoder, with --prompt) with its denoiser and
// computes each sample's conditioning once; middle stages load only the denoiser; the last
// stage loads the denoiser and the VAE decoder and writes, per sample, video.gif, video.mp4,
// frames/NNN.png and report.json.
//
// Contract: the same seed gives bit-identical frames with 1 or K processes (sample s draws
// its noise from a stream keyed by (seed, s); batch composition does not depend on K). Bad
// input (a missing or non-image file, a missing config, a corrupt or mis-shaped checkpoint,
// impossible sizes) is reported before any worker starts, as one line naming the file.
package generate

import (
	"errors"
	"flag"
	"fmt"
	"github.com/vdpp/vdpp/comm"
	"math"
	"strconv"
	"time"

	"github.com/vdpp/vdpp/internal/cacheflag"
	"github.com/vdpp/vdpp/pipeline"
)

// ErrOptions marks invalid command-line options.
var ErrOptions = errors.New("generate: bad options")

// Options are the flags of `vdpp generate` (0 means the model's default: SVD's pipeline
// defaults and the checkpoint's frame count and size; WanPipeline's for Wan).
type Options struct {
	Model   string // checkpoint folder
	Variant string
	Image   string
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
	NumFrames      int
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
	NProc            int
	Out              string
	Backend          string
	Timeout          time.Duration
	// HeartbeatTimeout is how long a rank may hear nothing from another (not even a
	// heartbeat) before the job ends, naming the lost rank and its node (0: the default,
	// comm.DefaultHeartbeatTimeout).
	HeartbeatTimeout time.Duration
	Progress         string // "auto", "bar" or "plain"
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
}

// DefaultOptions mirrors the pipeline's defaults; sizes, frames and steps left at 0 come from
// the model (Resolve).
func DefaultOptions() Options {
	return Options{
		MinGuidance: -1, MaxGuidance: -1, GuidanceScale: -1, FPS: 7, MotionBucketID: 127, NoiseAugStrength: 0.02,
		DecodeChunkSize: -1, Overlap: -1, NumSamples: 1, MicroBatch: 1, NProc: 1, Out: "out",
		Timeout: 10 * time.Minute, HeartbeatTimeout: comm.DefaultHeartbeatTimeout, Progress: "auto", Cache: cacheflag.Default(),
	}
}

// RegisterFlags binds the options to fs.
func (o *Options) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Model, "model", o.Model, `checkpoint folder in the diffusers layout, or "builtin"`)
	fs.StringVar(&o.Variant, "variant", o.Variant, `weights variant, e.g. "fp16" (converted to float32)`)
	fs.StringVar(&o.Image, "image", o.Image, "input image (PNG or JPEG) of an image-to-video model (SVD)")
	fs.StringVar(&o.Prompt, "prompt", o.Prompt, "prompt of a text-to-video model (Wan), encoded by the folder's text_encoder/ and tokenizer/")
	fs.StringVar(&o.NegativePrompt, "negative-prompt", o.NegativePrompt, `negative prompt, the unconditional half of CFG (default "")`)
	fs.StringVar(&o.PromptEmbeds, "prompt-embeds", o.PromptEmbeds, "safetensors file of prompt embeddings [L, text_dim] or [1, L, text_dim] for a text-to-video model (Wan)")
	fs.StringVar(&o.NegativePromptEmbeds, "negative-prompt-embeds", o.NegativePromptEmbeds, "safetensors file of negative prompt embeddings (needed when --guidance-scale > 1)")
	fs.Float64Var(&o.GuidanceScale, "guidance-scale", o.GuidanceScale, "CFG scale of a text-to-video model, > 1 turns on CFG (-1: the model's, 5 for Wan)")
	fs.Float64Var(&o.GuidanceScale2, "guidance-scale-2", o.GuidanceScale2, "CFG scale of a two-expert model's low-noise expert (0: --guidance-scale)")
	fs.IntVar(&o.NumFrames, "num-frames", o.NumFrames, "frames (0: the model's: SVD the UNet config's num_frames, 14 for builtin; Wan 81, WanPipeline's default, very slow on a CPU)")
	fs.IntVar(&o.Window, "window", o.Window, "frames per temporal window when --num-frames exceeds it (0: the model's native frame count; Wan: 1 + 4k)")
	fs.IntVar(&o.Overlap, "overlap", o.Overlap, "frames shared by neighbouring windows, blended at every step (-1: the family's, a quarter of the window; Wan: a multiple of 4)")
	fs.StringVar(&o.Blend, "blend", o.Blend, `blend of the overlapping frames: linear or cosine ("": cosine)`)
	fs.IntVar(&o.Steps, "steps", o.Steps, "denoising steps (0: the model's: 25 for SVD and builtin; Wan 50, WanPipeline's default)")
	fs.IntVar(&o.Height, "height", o.Height, "video height, a multiple of the VAE's factor (0 with --width 0: the model's: SVD 576 for the released checkpoints, 64 for builtin; Wan 480, WanPipeline's default, very slow on a CPU)")
	fs.IntVar(&o.Width, "width", o.Width, "video width (0 with --height 0: the model's: SVD 1024 for the released checkpoints, 64 for builtin; Wan 832, WanPipeline's default)")
	fs.Float64Var(&o.MinGuidance, "min-guidance", o.MinGuidance, "guidance weight of the first frame (-1: the model's vdpp_sampling.json: 2 for builtin; 1, as SVD, for a folder without one)")
	fs.Float64Var(&o.MaxGuidance, "max-guidance", o.MaxGuidance, "guidance weight of the last frame, > 1 turns on CFG (-1: the model's vdpp_sampling.json: 4 for builtin; 3, as SVD, for a folder without one)")
	fs.IntVar(&o.FPS, "fps", o.FPS, "frames per second (the UNet is conditioned on fps-1)")
	fs.IntVar(&o.MotionBucketID, "motion-bucket-id", o.MotionBucketID, "motion conditioning")
	fs.Float64Var(&o.NoiseAugStrength, "noise-aug-strength", o.NoiseAugStrength, "noise added to the conditioning image")
	fs.IntVar(&o.DecodeChunkSize, "decode-chunk-size", o.DecodeChunkSize, "frames decoded at once (0: all; -1: the model's vdpp_sampling.json: 7 for builtin; all for a folder without one)")
	fs.IntVar(&o.DecodeRanks, "decode-ranks", o.DecodeRanks, "ranks that share the VAE decode: the last stage and the N-1 before it (0 or 1: the last stage alone); bit-identical")
	fs.Float64Var(&o.DecodeSteps, "decode-steps", o.DecodeSteps, "one sample's decode cost in denoising steps; the step cut moves steps off the decoding stages to balance it, as vdpp plan does (0: cut by steps alone); bit-identical")
	fs.Float64Var(&o.ConditionSteps, "condition-steps", o.ConditionSteps, "one sample's conditioning cost (stage 0's image or text encoder) in denoising steps; the step cut moves steps off stage 0 to balance it (0: not counted)")
	fs.IntVar(&o.VAETile, "vae-tile", o.VAETile, "decode (and encode) in overlapping spatial tiles of this many pixels, as diffusers' enable_tiling (0: whole frames; -1: the VAE's sample_size)")
	fs.Int64Var(&o.Seed, "seed", o.Seed, "seed; sample s uses the stream (seed, s)")
	fs.IntVar(&o.NumSamples, "num-samples", o.NumSamples, "videos to generate from the image")
	fs.IntVar(&o.MicroBatch, "micro-batch", o.MicroBatch, "samples per UNet call")
	fs.IntVar(&o.NProc, "nproc", o.NProc, "pipeline stages, one process each")
	fs.StringVar(&o.Out, "out", o.Out, "output folder")
	fs.StringVar(&o.Backend, "backend", o.Backend, "GoMLX backend (default: GOMLX_BACKEND or go)")
	fs.DurationVar(&o.Timeout, "timeout", o.Timeout, "deadline for every hand-off between stages, counted from the last step any rank finished and extended to 4x the longest step (the one in progress included): a slow step is not a hang")
	fs.DurationVar(&o.HeartbeatTimeout, "heartbeat-timeout", o.HeartbeatTimeout, "a rank silent this long (no data, no heartbeat: killed, node or link down) ends the job, named")
	fs.StringVar(&o.Progress, "progress", o.Progress, "progress display: auto, bar or plain")
	o.Cache.Register(fs)
}

// WorkerArgs renders the options as flags for `vdpp worker generate`.
func (o Options) WorkerArgs() []string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	i := strconv.Itoa
	return append([]string{
		"--model=" + o.Model, "--variant=" + o.Variant, "--image=" + o.Image,
		"--prompt=" + o.Prompt, "--negative-prompt=" + o.NegativePrompt,
		"--prompt-embeds=" + o.PromptEmbeds, "--negative-prompt-embeds=" + o.NegativePromptEmbeds,
		"--guidance-scale=" + f(o.GuidanceScale), "--guidance-scale-2=" + f(o.GuidanceScale2),
		"--num-frames=" + i(o.NumFrames), "--window=" + i(o.Window), "--overlap=" + i(o.Overlap), "--blend=" + o.Blend, "--steps=" + i(o.Steps), "--height=" + i(o.Height), "--width=" + i(o.Width),
		"--min-guidance=" + f(o.MinGuidance), "--max-guidance=" + f(o.MaxGuidance), "--fps=" + i(o.FPS),
		"--motion-bucket-id=" + i(o.MotionBucketID), "--noise-aug-strength=" + f(o.NoiseAugStrength),
		"--decode-chunk-size=" + i(o.DecodeChunkSize), "--decode-ranks=" + i(o.DecodeRanks), "--decode-steps=" + f(o.DecodeSteps), "--condition-steps=" + f(o.ConditionSteps), "--vae-tile=" + i(o.VAETile), "--seed=" + strconv.FormatInt(o.Seed, 10),
		"--num-samples=" + i(o.NumSamples), "--micro-batch=" + i(o.MicroBatch), "--nproc=" + i(o.NProc),
		"--out=" + o.Out, "--backend=" + o.Backend, "--timeout=" + o.Timeout.String(), "--heartbeat-timeout=" + o.HeartbeatTimeout.String(), "--progress=plain",
	}, o.Cache.Args()...)
}

// Validate checks what can be checked without opening files.
func (o Options) Validate() error {
	switch {
	case o.Model == "":
		return fmt.Errorf("%w: --model DIR is required", ErrOptions)
	case o.Image == "" && o.PromptEmbeds == "" && o.Prompt == "":
		return fmt.Errorf("%w: --image FILE (image-to-video) or --prompt TEXT / --prompt-embeds FILE (text-to-video) is required", ErrOptions)
	case o.Prompt != "" && o.PromptEmbeds != "":
		return fmt.Errorf("%w: --prompt and --prompt-embeds both given: give one", ErrOptions)
	case o.NegativePrompt != "" && o.NegativePromptEmbeds != "":
		return fmt.Errorf("%w: --negative-prompt and --negative-prompt-embeds both given: give one", ErrOptions)
	case o.NegativePrompt != "" && o.Prompt == "":
		return fmt.Errorf("%w: --negative-prompt needs --prompt (with --prompt-embeds give --negative-prompt-embeds)", ErrOptions)
	case o.NegativePromptEmbeds != "" && o.PromptEmbeds == "":
		return fmt.Errorf("%w: --negative-prompt-embeds needs --prompt-embeds (with --prompt give --negative-prompt)", ErrOptions)
	case o.NumSamples < 1:
		return fmt.Errorf("%w: --num-samples %d", ErrOptions, o.NumSamples)
	case o.MicroBatch < 1:
		return fmt.Errorf("%w: --micro-batch %d", ErrOptions, o.MicroBatch)
	case o.NProc < 1:
		return fmt.Errorf("%w: --nproc %d", ErrOptions, o.NProc)
	case o.DecodeRanks < 0 || o.DecodeRanks > o.NProc:
		return fmt.Errorf("%w: --decode-ranks %d must be between 0 and --nproc %d", ErrOptions, o.DecodeRanks, o.NProc)
	case o.DecodeSteps < 0 || math.IsNaN(o.DecodeSteps) || math.IsInf(o.DecodeSteps, 0):
		return fmt.Errorf("%w: --decode-steps %v must be a finite cost >= 0", ErrOptions, o.DecodeSteps)
	case o.ConditionSteps < 0 || math.IsNaN(o.ConditionSteps) || math.IsInf(o.ConditionSteps, 0):
		return fmt.Errorf("%w: --condition-steps %v must be a finite cost >= 0", ErrOptions, o.ConditionSteps)
	case o.Steps < 0:
		return fmt.Errorf("%w: --steps %d", ErrOptions, o.Steps)
	case o.Steps > 0 && o.Steps < o.NProc:
		return fmt.Errorf("%w: --steps %d cannot fill --nproc %d stages", ErrOptions, o.Steps, o.NProc)
	case o.Out == "":
		return fmt.Errorf("%w: --out is required", ErrOptions)
	case o.Timeout <= 0:
		return fmt.Errorf("%w: --timeout %v", ErrOptions, o.Timeout)
	}
	switch o.Progress {
	case "auto", "bar", "plain":
	default:
		return fmt.Errorf("%w: --progress %q (want auto, bar or plain)", ErrOptions, o.Progress)
	}
	if _, err := o.Cache.Rule(); err != nil {
		return fmt.Errorf("%w: %w", ErrOptions, err)
	}
	return nil
}

// StageExtras is each of the --nproc stages' fixed cost per item in steps, which the step
// cut balances: the micro-batch's conditioning (--condition-steps per sample) on stage 0
// and its decode (--decode-steps per sample) shared by the decoding stages; nil without
// either cost.
func (o Options) StageExtras() []float64 {
	b := float64(o.MicroBatch)
	return pipeline.StageExtras(o.NProc, b*o.ConditionSteps, 0, b*o.DecodeSteps, o.DecodeRanks)
}
