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
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/internal/cacheflag"
	"github.com/vdpp/vdpp/internal/cli"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/knob"
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
	// Params are the knobs of the generation (family.Params: frames, steps, size, guidance,
	// seed, windows, step cache, ...), one flag each, derived from the families' knob
	// tables (RegisterFlags); Given says which the command line set. A knob neither given
	// nor set (zero) takes the model's default (Resolve).
	family.Params
	Given      knob.Given
	NumSamples int
	MicroBatch int
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
	// ModelName is --model as the user gave it ("builtin-wan"), kept when Resolve puts the
	// model's folder in Model: the report names the model by it.
	ModelName string
	// FromReport is a report.json whose job this run repeats (ExpandFromReport puts its
	// job's flags before the command line's).
	FromReport string
	// stepsReport is a cached run's report.json given as --cache-steps: Resolve reads
	// its computed steps into the cache's steps.
	stepsReport string
	// CacheCheck runs the same job again without the cache after a cached run and scores
	// the cached videos against the uncached ones (PSNR, SSIM), with the time measured
	// both ways, in the cache line and report.json.
	CacheCheck bool
}

// DefaultOptions are the command's defaults; the knobs (Params) left unset come from the
// model (Resolve).
func DefaultOptions() Options {
	return Options{
		NumSamples: 1, MicroBatch: 1, NProc: 1, Goal: "throughput",
		Timeout: 10 * time.Minute, HeartbeatTimeout: comm.DefaultHeartbeatTimeout, Progress: "auto", Given: knob.Given{},
	}
}

// RegisterFlags binds the options to fs, with o's current values as defaults.
func (o *Options) RegisterFlags(fs *cli.FlagSet) {
	fs.StringVar(&o.Model, "model", o.Model, "the model `NAME|DIR`: \"builtin\" (SVD), \"builtin-wan\" (Wan, --prompt), a diffusers folder (its model_index.json picks the family) or ORG/NAME[@REV] from the local Hugging Face cache")
	fs.StringVar(&o.Variant, "variant", o.Variant, `weights variant, e.g. "fp16" (converted to float32)`)
	o.Weights.RegisterFlags(fs.FlagSet)
	// The job's inputs, one flag each, derived from the table serve's parts and fields
	// come from (knob.AllInputs), all in help's input group.
	fields := o.inputFields()
	for _, in := range knob.AllInputs {
		p, ok := fields[in.Name]
		if !ok {
			panic("generate: no option holds the input " + in.Name) // TestInputFlags
		}
		fs.StringVar(p, in.FlagName(), *p, inputHelp(in))
		if fs.Groups == nil {
			fs.Groups = map[string]cli.Group{}
		}
		fs.Groups[in.FlagName()] = cli.Input
	}
	fs.StringVar(&o.PromptEmbeds, "prompt-embeds", o.PromptEmbeds, "safetensors `FILE` of prompt embeddings [L, text_dim] or [1, L, text_dim] for a text-to-video model (Wan)")
	fs.StringVar(&o.NegativePromptEmbeds, "negative-prompt-embeds", o.NegativePromptEmbeds, "safetensors `FILE` of negative prompt embeddings (needed when --guidance-scale > 1)")
	fs.Var(lora.Flag{Specs: &o.LoRA}, "lora", "LoRA `FILE[:STRENGTH]` merged into the denoiser(s) at load, repeatable (strength 1 by default; docs/lora.md)")
	fs.Var(lora.Flag{Specs: &o.LoRA2}, "lora-2", "LoRA `FILE[:STRENGTH]` of a two-expert model's second (low-noise) expert, repeatable; given, --lora is the first expert's only")
	fs.IntVar(&o.DecodeRanks, "decode-ranks", o.DecodeRanks, "ranks that share the VAE decode: the last stage and the N-1 before it (0 or 1: the last stage alone); bit-identical")
	fs.Float64Var(&o.DecodeSteps, "decode-steps", o.DecodeSteps, "one sample's decode cost in denoising steps; the step cut moves steps off the decoding stages to balance it, as vdpp plan does (0: cut by steps alone); bit-identical")
	fs.Float64Var(&o.ConditionSteps, "condition-steps", o.ConditionSteps, "one sample's conditioning cost (stage 0's image or text encoder) in denoising steps; the step cut moves steps off stage 0 to balance it (0: not counted)")
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
	fs.StringVar(&o.FromReport, FromReportFlag, o.FromReport, "re-run the job a sample's report.json `FILE` describes (the same bits on the same mesh); a flag given too replaces the report's value (--out, --seed), a list its whole list (--lora, --lora-2; --lora= drops the LoRAs)")
	fs.StringVar(&o.ModelName, "model-name", o.ModelName, "internal: --model as given")
	fs.Hide("model-name")
	fs.BoolVar(&o.CacheCheck, "cache-check", o.CacheCheck, "with --cache: run the job again without the cache and print the cached videos' PSNR/SSIM against the uncached ones and the time saved, measured (docs/caching.md)")
	if o.Given == nil {
		o.Given = knob.Given{}
	}
	for _, k := range family.AllKnobs().Sorted() {
		fs.Var(&knobFlag{table: family.AllKnobs(), params: &o.Params, given: o.Given, k: k, report: &o.stepsReport}, k.FlagName(), knobHelp(k))
	}
}

// inputFields are the options that hold the job's inputs (knob.AllInputs), by name.
func (o *Options) inputFields() map[string]*string {
	return map[string]*string{"image": &o.Image, "last_image": &o.LastImage, "prompt": &o.Prompt, "negative_prompt": &o.NegativePrompt}
}

// inputHelp is an input flag's help: the table's, after the value's kind (back-quoted, the
// type help shows: an image FILE, a TEXT).
func inputHelp(in knob.Input) string {
	if in.Kind == knob.ImageInput {
		return "`FILE`: " + in.Help
	}
	return "`TEXT`: " + in.Help
}

// knobHelp is a knob flag's help: what it does, its kind and range (the kind back-quoted,
// the type help shows), the families that read it when not all do, and its default.
func knobHelp(k knob.Knob) string {
	h := k.Help
	switch k.Kind {
	case knob.Int, knob.Float:
		h += "; `" + map[knob.Kind]string{knob.Int: "int", knob.Float: "float"}[k.Kind] + "` " + k.Range()
	case knob.String:
		h += "; `string`"
		if len(k.Choices) > 0 {
			h += ", " + k.Range()
		}
	case knob.Steps:
		h += "; `string` of steps and ranges, or a cached run's report.json"
	}
	if owners := family.ReadersOf(k.Name); len(owners) < len(family.FamilyNames()) {
		h += " (" + strings.Join(owners, ", ") + ")"
	}
	def := k.Default
	if def == "" {
		def = "the model's"
	}
	return h + " (default: " + def + ")"
}

// knobFlag is the flag.Value of a knob: it sets the knob in params from the command line's
// text (checked against the knob's kind and range: one line naming the flag) and marks it
// given. A steps list may also be a report.json of a cached run (its computed steps): its
// name goes to report, read by Resolve (so -h with it reads no file).
type knobFlag struct {
	table  knob.Table
	params *family.Params
	given  knob.Given
	k      knob.Knob
	report *string
}

func (f *knobFlag) String() string {
	if f == nil || f.params == nil {
		return ""
	}
	s, _ := f.table.Text(f.params, f.k.Name)
	if f.k.Kind == knob.Steps && f.report != nil && *f.report != "" && f.table.IsZero(f.params, f.k.Name) {
		return *f.report
	}
	return s
}

func (f *knobFlag) Set(s string) error {
	if f.k.Kind == knob.Steps && strings.HasSuffix(s, ".json") && f.report != nil {
		*f.report = s
		f.given[f.k.Name] = true
		return nil
	}
	if err := f.table.SetText(f.params, f.given, f.k.Name, s); err != nil {
		if ke, ok := knob.AsError(err); ok {
			// flag's message names the flag already: say what is wrong with the value.
			return errors.New(strings.TrimPrefix(ke.In(knob.Flags), f.k.Spell(knob.Flags)+" "))
		}
		return err
	}
	return nil
}

func (f *knobFlag) IsBoolFlag() bool { return f.k.Kind == knob.Bool }

// set is the knobs of o that are set: given on the command line, or not zero (options
// built in code, and resolved options, whose every set value is final).
func (o Options) set() knob.Given {
	out := knob.Given{}
	t := family.AllKnobs()
	for _, k := range t {
		if o.Given[k.Name] || !t.IsZero(&o.Params, k.Name) {
			out[k.Name] = true
		}
	}
	return out
}

// WorkerArgs renders the options as the flags of `vdpp worker generate`: every flag of
// RegisterFlags but the knobs that are not set (set), generated from the flag set (parsing
// them gives o back).
func (o Options) WorkerArgs() []string {
	fs := cli.New("worker generate", nil, nil)
	c := o
	c.Params = cloneParams(o.Params)
	c.Given = knob.Given{}
	c.RegisterFlags(fs)
	set := o.set()
	var skip []string
	for _, k := range family.AllKnobs() {
		if !set[k.Name] {
			skip = append(skip, k.FlagName())
		}
	}
	return fs.AsArgs(skip...)
}

// cloneParams copies p with its own slices.
func cloneParams(p family.Params) family.Params {
	p.Cache.Steps = slices.Clone(p.Cache.Steps)
	p.LoRA, p.LoRA2 = slices.Clone(p.LoRA), slices.Clone(p.LoRA2)
	return p
}

// withModelDefaults fills the knobs of o that are not set (set) from def, the model's
// defaults (over table t, the model's knobs).
func (o Options) withModelDefaults(def family.Params, t knob.Table) Options {
	set := o.set()
	p := cloneParams(o.Params)
	if err := t.Merge(&p, &def, &o.Params, set); err != nil {
		panic(err) // the tables are held to family.Params by their tests
	}
	o.Params = p
	return o
}

// readStepsReport reads stepsReport's computed steps into the cache's steps (the
// --cache-steps a report.json names).
func (o Options) readStepsReport() (Options, error) {
	if o.stepsReport == "" {
		return o, nil
	}
	steps, err := cacheflag.ParseSteps(o.stepsReport)
	if err != nil {
		return o, badOptions("%w", err)
	}
	o.Params = cloneParams(o.Params)
	if o.Given == nil {
		o.Given = knob.Given{}
	}
	if err := family.AllKnobs().SetText(&o.Params, o.Given, "cache_steps", knob.FormatSteps(steps)); err != nil {
		return o, flagError(err)
	}
	o.stepsReport = ""
	return o, nil
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
	case o.Timeout <= 0:
		return badOptions("--timeout %v: the hand-off deadline must be positive", o.Timeout)
	}
	switch o.Progress {
	case "auto", "bar", "plain":
	default:
		return badOptions("--progress %q (want auto, bar or plain)", o.Progress)
	}
	if o.CacheCheck && !o.Cache.On() {
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
func (o Options) guided() bool { return family.AllKnobs().Guided(&o.Params) }

// mesh names the options' mesh, for messages.
func (o Options) mesh() string { return comm.Mesh{PP: o.PP, CFG: o.CFG, CP: o.CP, DP: o.DP}.String() }
