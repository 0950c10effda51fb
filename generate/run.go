package generate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vdpp/vdpp/builtin"
	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/internal/cli"
	"github.com/vdpp/vdpp/model"
	_ "github.com/vdpp/vdpp/model/families" // every shipped family answers --model
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/knob"
	"github.com/vdpp/vdpp/model/lora"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/plan"
	"github.com/vdpp/vdpp/video"
)

// LaunchFunc starts nproc local workers running `vdpp <args...>`, their output going to
// out, and waits for them.
type LaunchFunc func(ctx context.Context, nproc int, args []string, out io.Writer) error

// Runner runs `vdpp generate`.
type Runner struct {
	// Launch starts the workers of a multi-process run; tests swap it.
	Launch LaunchFunc
	Log    *slog.Logger
	// Progress receives the progress bar or lines, and warnings about the options (see
	// CPUDefaultsWarning); Terminal says whether it is a terminal.
	Progress io.Writer
	Terminal bool
	// Width is the terminal's width in columns (0: unknown), which the bar keeps within;
	// PlainEvery is how often the plain display prints a line (0: every 10 s).
	Width      int
	PlainEvery time.Duration
	// PinCores runs every rank as a process of its own pinned to one core (local rank i
	// on core i mod the cores; Linux's taskset), as if each stage had a device of its own;
	// a one-process run is launched too.
	PinCores bool
}

// Resolve checks the inputs before anything runs and fills defaults from the checkpoint:
// the checkpoint's configs and weight headers, the image, the sizes, and the mesh (except
// with --plan auto, whose mesh Runner.Run asks the planner for).
func Resolve(o Options) (Options, error) {
	o, err := resolveInputs(o)
	if err != nil || o.Plan == "auto" {
		return o, err // --plan auto: Runner.Run asks the planner for the mesh
	}
	return o.resolveMeshFor()
}

// resolveMeshFor resolves the mesh (ResolveMesh) and checks it against the video as the
// server checks a job against its workers' mesh (family.Description.CheckMesh): a latent
// frame per cp rank at least, temporal windows on pp x dp meshes only.
func (o Options) resolveMeshFor() (Options, error) {
	o, err := o.ResolveMesh()
	if err != nil || (o.CP == 1 && o.CFG == 1) {
		return o, err
	}
	m, err := family.Resolve(o.Model)
	if err != nil {
		return o, err
	}
	desc, err := m.Describe()
	if err != nil {
		return o, err
	}
	if err := desc.CheckMesh(o.Params, o.CFG, o.CP); err != nil {
		return o, flagError(err)
	}
	return o, nil
}

// resolveInputs checks the inputs and fills the model's defaults (Resolve without the mesh).
func resolveInputs(o Options) (Options, error) {
	o, err := o.readStepsReport()
	if err != nil {
		return o, err
	}
	if err := o.Validate(); err != nil {
		return o, err
	}
	m, err := family.Resolve(o.Model)
	if errors.Is(err, family.ErrNotCached) {
		return o, badOptions("--model %w", err)
	}
	if errors.Is(err, family.ErrUnknown) {
		return o, badOptions("%w", err) // it names the value (and the nearest known one)
	}
	if err != nil {
		return o, err
	}
	if m.Dir == "" {
		return o, badOptions("--model %s has no conditioner or decoder: give a model folder or %q", o.Model, builtin.Name)
	}
	// A flag of another family is refused, not accepted and ignored.
	if err := family.RefuseGiven(m.Family, o.Model, family.AllKnobs(), o.set()); err != nil {
		return o, badOptions("%w", err)
	}
	if o.ModelName == "" {
		o.ModelName = o.Model
	}
	named := o.ModelName // as given, for messages
	o.Model = m.Dir
	if err := m.Preflight(family.Options{Variant: o.Variant, Weights: o.Weights, Roles: family.AllRoles}); err != nil {
		return o, err
	}
	desc, err := m.Describe()
	if err != nil {
		return o, err
	}
	// The sampler and the LoRAs as given: checked against the model, the LoRAs' paths
	// made absolute.
	if err := checkScheduler(o, named, desc); err != nil {
		return o, err
	}
	if o, err = resolveLoRAs(o, m); err != nil {
		return o, err
	}
	// The knobs set, over the model's defaults, checked together and against the folder
	// (the family's Validate), the temporal windows and the step cache resolved: every
	// value is refused here, naming its flag, before anything runs.
	set := o.set()
	p, err := desc.ResolveJob(o.Params, set)
	if err == nil {
		// The sampler the model's folder has, unless chosen; the LoRAs as resolved.
		if p.Scheduler == "" {
			p.Scheduler = desc.DefaultScheduler()
		}
		if p.FlowShift == 0 {
			p.FlowShift = desc.FlowShift
		}
		p.LoRAs = o.LoRAs
	}
	if err == nil {
		err = m.Validate(p)
	}
	if err == nil {
		_, err = m.ResolveCache(p.Cache, p.Steps)
	}
	if err != nil {
		return o, flagError(err)
	}
	if p.Seed == knob.RandomSeed {
		p.Seed = knob.DrawSeed() // recorded in every sample's report.json; Run says it
	}
	// Every value now final is set: the workers get it as given.
	o.Params, o.Given = p, knob.Given{}
	for _, k := range desc.Knobs {
		if set[k.Name] || !desc.Knobs.IsZero(&o.Params, k.Name) {
			o.Given[k.Name] = true
		}
	}
	if desc.TextDim > 0 {
		if o, err = resolveText(o, m, desc); err != nil {
			return o, err
		}
	}
	if desc.TextDim == 0 && (o.PromptEmbeds != "" || o.NegativePromptEmbeds != "") {
		return o, badOptions("--prompt-embeds: --model %s is an image-to-video model and takes no prompt embeddings (a --prompt is recorded, as the server records one)", o.Model)
	}
	return resolveImages(o, desc)
}

// modelKind names what a model makes a video from, for messages: "a text-to-video", "an
// image-to-video" (SVD), "an image-and-prompt-to-video" (Wan image-to-video), "a
// text(-and-image)-to-video" (an image is optional).
func modelKind(desc family.Description) string {
	switch {
	case desc.TextDim == 0:
		return "an image-to-video"
	case desc.ImageNeed() == family.NeedRequired:
		return "an image-and-prompt-to-video"
	case desc.ImageNeed() == family.NeedOptional:
		return "a text(-and-image)-to-video"
	}
	return "a text-to-video"
}

// resolveImages checks --image and --last-image against what the model takes
// (family.Description's Image and LastImage) and that the files are images.
func resolveImages(o Options, desc family.Description) (Options, error) {
	kind := modelKind(desc)
	switch {
	case o.Image != "" && desc.ImageNeed() == family.NeedNone:
		return o, badOptions("--image: --model %s is %s model and takes no image", o.Model, kind)
	case o.Image == "" && desc.ImageNeed() == family.NeedRequired:
		return o, badOptions("--model %s is %s model: --image FILE is required", o.Model, kind)
	case o.LastImage != "" && desc.LastImage == family.NeedNone:
		return o, badOptions("--last-image: --model %s takes no last image (a first-last-frame model does)", o.Model)
	case o.LastImage == "" && desc.LastImage == family.NeedRequired:
		return o, badOptions("--model %s is a first-last-frame model: --last-image FILE is required (with --image)", o.Model)
	}
	for _, f := range []struct{ flag, path string }{{"--image", o.Image}, {"--last-image", o.LastImage}} {
		if f.path == "" {
			continue
		}
		img, err := video.LoadImage(f.path)
		if err != nil {
			return o, err
		}
		// An image the video cannot use (stretched far out of shape) is refused before
		// any work, as the server refuses it.
		b := img.Bounds()
		if err := video.CheckAspect(b.Dx(), b.Dy(), o.Width, o.Height); err != nil {
			return o, badOptions("%s %s: %s", f.flag, f.path, strings.TrimPrefix(err.Error(), video.ErrAspect.Error()+": "))
		}
	}
	return o, nil
}

// flagError is err in the command line's terms: a refused knob named by its flag, one line
// (ErrOptions, and still the knob's error).
func flagError(err error) error {
	if ke, ok := knob.AsError(err); ok {
		return cli.Errorf(ErrOptions, "%s%w", ke.In(knob.Flags), silent{ke})
	}
	return err
}

// silent wraps an error without adding to the message.
type silent struct{ err error }

func (s silent) Error() string { return "" }
func (s silent) Unwrap() error { return s.err }

// resolveText checks the inputs of a text-to-video model: the embeddings files and their
// width, the guidance scales.
func resolveText(o Options, m family.Resolved, desc family.Description) (Options, error) {
	if o.PromptEmbeds == "" && o.Prompt == "" {
		return o, badOptions("--model %s is %s model: --prompt TEXT (or --prompt-embeds FILE.safetensors) is required", o.Model, modelKind(desc))
	}
	if o.Prompt != "" {
		// The first stage loads the tokenizer and text encoder: check they are there.
		if err := m.Preflight(family.Options{Variant: o.Variant, Weights: o.Weights, Roles: family.Roles{Condition: true}, Prompts: true}); err != nil {
			return o, badOptions("--prompt: %w (give --prompt-embeds FILE instead)", err)
		}
		return o, nil // the negative prompt defaults to "", as in diffusers
	}
	if _, err := LoadEmbeddings(o.PromptEmbeds, "--prompt-embeds", desc); err != nil {
		return o, err
	}
	switch {
	case o.NegativePromptEmbeds != "":
		if _, err := LoadEmbeddings(o.NegativePromptEmbeds, "--negative-prompt-embeds", desc); err != nil {
			return o, err
		}
	case o.GuidanceScale > 1:
		return o, badOptions("--guidance-scale %v > 1 runs CFG, which needs --negative-prompt-embeds FILE (or --guidance-scale 1)", o.GuidanceScale)
	}
	return o, nil
}

// Run generates o.NumSamples videos and returns the sample folders.
func (r *Runner) Run(ctx context.Context, o Options) ([]string, error) {
	given := o
	o, err := Resolve(o)
	if err != nil {
		return nil, err
	}
	say := r.Progress
	if say == nil || o.Quiet {
		say = io.Discard
	}
	if w := CPUDefaultsWarning(given, o, OnCPU); w != "" {
		fmt.Fprintln(say, w)
	}
	if o.Prompt != "" && o.Image != "" {
		fmt.Fprintf(say, "generate: --prompt: --model %s is image-to-video: the prompt is recorded in report.json, not used (as the server records one)\n", given.Model)
	}
	if given.Seed == knob.RandomSeed {
		fmt.Fprintf(say, "generate: --seed -1: drew seed %d (in each report.json)\n", o.Seed)
	}
	o, where, err := PrepareOut(o)
	if err != nil {
		return nil, err
	}
	fmt.Fprintln(say, where)
	if o.Plan == "auto" {
		if o, err = autoMesh(ctx, o, say); err != nil {
			return nil, err
		}
	}
	log := r.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// With a progress bar on the terminal (or --quiet), the log lines (this process's and
	// the workers') go to OUT/generate.log instead, so they do not tear the bar.
	var workerOut io.Writer = os.Stderr
	if r.bar(o) || o.Quiet {
		lf, err := os.Create(filepath.Join(o.Out, LogFile))
		if err != nil {
			return nil, fmt.Errorf("generate: %w", err)
		}
		defer lf.Close()
		log = slog.New(slog.NewTextHandler(lf, nil))
		workerOut = lf
	}
	if o.ProgressDir == "" && r.Progress != nil && !o.Quiet {
		dir, err := progressDir()
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		o.ProgressDir = dir
	}
	done := make(chan struct{})
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		r.display(o, o.ProgressDir, done)
	}()
	if o.NProc == 1 && !r.PinCores {
		err = RunRank(ctx, o, comm.SingleProcess(), log)
	} else {
		launch := r.Launch
		switch {
		case launch != nil:
		case r.PinCores:
			launch = pinnedLaunch
		default:
			launch = defaultLaunch
		}
		err = launch(ctx, o.NProc, append([]string{"worker", "generate"}, o.WorkerArgs()...), workerOut)
	}
	close(done)
	<-progressDone
	dirs := finished(o)
	if err != nil && (r.bar(o) || o.Quiet) {
		err = fmt.Errorf("%w (worker logs: %s)", err, filepath.Join(o.Out, LogFile))
	}
	if err != nil {
		if len(dirs) > 0 {
			return dirs, fmt.Errorf("%w (%d finished samples kept in %s)", err, len(dirs), o.Out)
		}
		return nil, err
	}
	if o.Cache.Mode != "" && o.Cache.Mode != pipeline.CacheNone && (!o.Quiet || o.CacheCheck) {
		// A cached run says in one line what its cache did (and, with --cache-check,
		// what it cost against the same job uncached).
		if err := r.reportCache(ctx, given, o, dirs, say); err != nil {
			return dirs, err
		}
	}
	return dirs, nil
}

func defaultLaunch(ctx context.Context, nproc int, args []string, out io.Writer) error {
	return comm.Launch(ctx, comm.LaunchOptions{NProcPerNode: nproc, NNodes: 1, Command: args, Stdout: out, Stderr: out})
}

// pinnedLaunch is defaultLaunch with local rank i pinned to core i mod the cores (taskset).
func pinnedLaunch(ctx context.Context, nproc int, args []string, out io.Writer) error {
	taskset, err := exec.LookPath("taskset")
	if err != nil {
		return fmt.Errorf("generate: pinning ranks to cores: %w", err)
	}
	start := func(spec comm.ProcSpec) (comm.Process, error) {
		cpu := strconv.Itoa(spec.LocalRank % runtime.NumCPU())
		spec.Args = append([]string{"-c", cpu, spec.Path}, spec.Args...)
		spec.Path = taskset
		return comm.StartProcess(spec)
	}
	return comm.Launch(ctx, comm.LaunchOptions{NProcPerNode: nproc, NNodes: 1, Command: args, Stdout: out, Stderr: out, Start: start})
}

// bar reports whether progress is drawn as a bar (on a terminal, or when asked).
func (r *Runner) bar(o Options) bool {
	return r.Progress != nil && (o.Progress == "bar" || (o.Progress == "auto" && r.Terminal))
}

// finished lists the sample folders whose report.json exists.
func finished(o Options) []string {
	var out []string
	for s := 0; s < o.NumSamples; s++ {
		dir := filepath.Join(o.Out, fmt.Sprintf("sample-%03d", s))
		if _, err := os.Stat(filepath.Join(dir, "report.json")); err == nil {
			out = append(out, dir)
		}
	}
	return out
}

// autoMesh asks the planner for the mesh of o's workload on --nproc devices (plan.AutoMesh,
// as `vdpp bench --plan auto`: the model's step cost measured here, the hand-offs and
// collectives between real processes), says what it chose, and returns o with that mesh.
func autoMesh(ctx context.Context, o Options, say io.Writer) (Options, error) {
	goal, err := plan.ParseGoal(o.Goal)
	if err != nil {
		return o, badOptions("--goal: %w", err)
	}
	m, err := family.Resolve(o.Model)
	if err != nil {
		return o, err
	}
	sim := model.Config{StepMS: 1, Cost: "sleep", HiddenChannels: 32, Seed: o.Seed}
	sh, err := plan.ResolveShape(m, sim, plan.Shape{Steps: o.Steps, NumFrames: o.NumFrames, Height: o.Height, Width: o.Width})
	if err != nil {
		return o, err
	}
	sim.LatentChannels = sh.LatentChannels
	// The guidance left to the model (-1) plans as unguided, as bench's defaults (1) do.
	guided := o.MaxGuidance > 1 || o.GuidanceScale > 1
	w := plan.Workload{Steps: sh.Steps, Samples: o.NumSamples, Frames: sh.LatentFrames, Height: sh.LatentHeight,
		Width: sh.LatentWidth, Channels: sh.LatentChannels, Guided: guided, MicroBatch: o.MicroBatch, Warmup: max(0, min(4, o.NumSamples-2))}
	// The workload as vdpp plan prints it: the same flags plan the same job.
	fmt.Fprintf(say, "generate: --plan auto: workload %s\n", w)
	best, err := plan.AutoMesh(ctx, plan.AutoRequest{Model: m, Backend: o.Backend, Sim: sim, Seed: o.Seed, Weights: o.Weights,
		Workload: w, Devices: o.NProc, Goal: goal})
	if err != nil {
		return o, fmt.Errorf("generate: --plan auto: %w", err)
	}
	if o.NProc == 0 {
		o.NProc = 7
	}
	o.PP, o.CFG, o.CP, o.DP, o.Plan = best.PP, best.CFG, best.CP, best.DP, ""
	fmt.Fprintf(say, "generate: --plan auto (%s) on %d devices chose %s: predicted first sample %.2f s, %.3g samples/s\n",
		o.Goal, o.NProc, o.mesh(), best.FirstSampleMS/1000, best.ThroughputPerS)
	return o.resolveMeshFor()
}

// checkScheduler refuses a --scheduler the model does not offer and a --flow-shift it does
// not take, in one line naming the flag and what the model offers.
func checkScheduler(o Options, model string, desc family.Description) error {
	c := family.SchedulerChoice{Scheduler: o.Scheduler, FlowShift: o.FlowShift}
	if desc.CheckScheduler(family.SchedulerChoice{Scheduler: c.Scheduler}) != nil {
		if len(desc.Schedulers) == 0 {
			return badOptions("--scheduler %q: --model %s offers no scheduler choice", o.Scheduler, model)
		}
		return badOptions("--scheduler %q: --model %s offers %s", o.Scheduler, model, strings.Join(desc.SchedulerNames(), ", "))
	}
	if desc.CheckScheduler(family.SchedulerChoice{FlowShift: c.FlowShift}) != nil {
		if desc.FlowShift == 0 {
			return badOptions("--flow-shift %v: --model %s is not a flow-matching model", o.FlowShift, model)
		}
		return badOptions("--flow-shift %v: the shift must be a positive number (the folder's is %v)", o.FlowShift, desc.FlowShift)
	}
	return nil
}

// resolveLoRAs makes the LoRA paths absolute (every rank opens them) and checks each file
// against the model's denoisers from its header, before any worker starts.
func resolveLoRAs(o Options, m family.Resolved) (Options, error) {
	for _, l := range []*[]lora.Spec{&o.LoRA, &o.LoRA2} {
		specs := slices.Clone(*l)
		for i, s := range specs {
			abs, err := filepath.Abs(s.Path)
			if err != nil {
				return o, badOptions("--lora %s: %v", s.Path, err)
			}
			specs[i].Path = abs
		}
		*l = specs
	}
	if err := m.CheckLoRAs(family.LoRAs{LoRA: o.LoRA, LoRA2: o.LoRA2}, ""); err != nil {
		flag := "--lora"
		if len(o.LoRA2) > 0 && errors.Is(err, family.ErrParams) {
			flag = "--lora-2"
		}
		return o, badOptions("%s: %s", flag, strings.TrimPrefix(strings.TrimPrefix(err.Error(), family.ErrParams.Error()+": "), lora.ErrLoRA.Error()+": "))
	}
	return o, nil
}
