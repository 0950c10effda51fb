package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"strings"

	"github.com/vdpp/vdpp/bench"
	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/internal/cacheflag"
	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/plan"
)

// planFlags are the flags of `vdpp plan`.
type planFlags struct {
	modelName, modelDir, cost, backend string
	hidden                             int
	seed                               int64
	stepMS                             float64
	steps, samples, microBatch, warmup int
	frames, channels, height, width    int // the latent's, resolved from the video's (resolveShape)
	numFrames, videoHeight, videoWidth int // the video's (0: the model's)
	minGuidance, maxGuidance           float64
	guidanceScale                      float64
	devices                            int
	goal                               string
	memory                             int64
	calibration                        string
	measure, measureProcs              bool
	handoffMS, bandwidth               float64
	prepareMS, finishMS                float64
	decodeRanks, decodeParts, chunk    int
	decodePartMS                       float64
	measureDecode                      bool
	cpAllToAlls                        int
	frameScaling                       float64
	weights                            [4]int64 // denoiser (-1: from the model), conditioner, VAE encoder, decoder
	json                               string
	cache                              cacheflag.Flags
	set                                map[string]bool // flags given on the command line
}

func (f *planFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.modelName, "model", "", "the model `NAME|DIR`: synthetic (the simulator, --step-ms per step), dummy, builtin, a model folder (its model_index.json picks the family) or ORG/NAME[@REV] from the local Hugging Face cache")
	fs.StringVar(&f.modelDir, "model-dir", "", "deprecated: --model svd --model-dir DIR is --model DIR")
	fs.StringVar(&f.cost, "cost", "sleep", "synthetic model: sleep or spin")
	fs.StringVar(&f.backend, "backend", "", "GoMLX backend for dummy/svd")
	fs.IntVar(&f.hidden, "hidden-channels", 32, "dummy model hidden channels")
	fs.Int64Var(&f.seed, "seed", 0, "dummy model weights seed")
	fs.Float64Var(&f.stepMS, "step-ms", 1, "synthetic model: cost of one sample-step in ms")
	fs.IntVar(&f.steps, "steps", 0, "denoising steps per sample (0: the model's)")
	fs.IntVar(&f.samples, "num-samples", 60, "samples to generate")
	fs.IntVar(&f.microBatch, "micro-batch", 1, "samples per denoiser call")
	fs.IntVar(&f.warmup, "warmup-samples", 4, "first completions left out of the throughput window, as in vdpp bench")
	fs.IntVar(&f.numFrames, "num-frames", 0, "video frames per sample (0: the model's)")
	fs.IntVar(&f.videoHeight, "height", 0, "video height; set with --width (0 and 0: the model's)")
	fs.IntVar(&f.videoWidth, "width", 0, "video width; set with --height (0 and 0: the model's)")
	fs.IntVar(&f.frames, "latent-frames", 0, "deprecated: use --num-frames")
	fs.IntVar(&f.channels, "latent-channels", 0, "simulators: latent channels (0: 4; other models: their own)")
	fs.IntVar(&f.height, "latent-height", 0, "deprecated: use --height")
	fs.IntVar(&f.width, "latent-width", 0, "deprecated: use --width")
	fs.Float64Var(&f.minGuidance, "min-guidance", 1, "SVD and simulators: guidance weight of the first frame")
	fs.Float64Var(&f.maxGuidance, "max-guidance", 1, "SVD and simulators: guidance weight of the last frame; > 1 is a guided run (cfg 2 possible)")
	fs.Float64Var(&f.guidanceScale, "guidance-scale", 1, "text-to-video models (Wan): CFG scale; > 1 is a guided run (cfg 2 possible)")
	fs.IntVar(&f.devices, "devices", 7, "devices (processes) to plan for: pp*cfg*cp*dp")
	fs.StringVar(&f.goal, "goal", "throughput", "rank meshes by latency or throughput")
	fs.Int64Var(&f.memory, "memory-per-device", 0, "memory of each device in bytes (0: no limit)")
	fs.StringVar(&f.calibration, "calibration", "", "calibration JSON: read if it exists, else measure and write it")
	fs.BoolVar(&f.measure, "measure", true, "measure the step and hand-off costs here (false: use --step-ms, --handoff-ms, --bandwidth as given)")
	fs.BoolVar(&f.measureProcs, "measure-processes", true, "when measuring: also time all-gathers over 2..devices real processes and a 2-process hand-off (vdpp worker calibrate)")
	fs.Float64Var(&f.handoffMS, "handoff-ms", 0.1, "latency of one hand-off or collective message, ms (given: overrides the measured or calibrated value)")
	fs.Float64Var(&f.bandwidth, "bandwidth", 0, "link bandwidth in bytes/s, 0: unlimited (given: overrides the measured or calibrated value)")
	fs.Float64Var(&f.prepareMS, "prepare-ms", 0, "conditioning cost per sample on stage 0, ms")
	fs.Float64Var(&f.finishMS, "finish-ms", 0, "decode cost per sample on the last stage, ms")
	fs.IntVar(&f.decodeRanks, "decode-ranks", 0, "stages sharing each sample's decode, as generate --decode-ranks (0 or 1: the last stage alone)")
	fs.IntVar(&f.decodeParts, "decode-parts", 0, "decode parts (chunks) per sample (given: overrides the measured value)")
	fs.Float64Var(&f.decodePartMS, "decode-part-ms", 0, "decode cost of one part of one sample, ms (given: overrides the measured value)")
	fs.BoolVar(&f.measureDecode, "measure-decode", false, "time the model's VAE decode, part by part, on a latent of the workload's shape")
	fs.IntVar(&f.chunk, "decode-chunk-size", -1, "with --measure-decode: frames decoded together (0: all; -1: the model's)")
	fs.IntVar(&f.cpAllToAlls, "cp-all-to-alls", -1, "all-to-alls per step inside the model in a cp group (-1: from the calibration, else 0 for synthetic, 1 for others)")
	fs.Float64Var(&f.frameScaling, "frame-scaling", -1, "share of the row cost proportional to frames, in [0,1] (-1: measured; 1 for synthetic, whose cost is per frame under cp)")
	fs.Int64Var(&f.weights[0], "denoiser-bytes", -1, "denoiser weight bytes (-1: from the model)")
	fs.Int64Var(&f.weights[1], "condition-bytes", 0, "conditioner weight bytes, stage 0 only (at least; a model folder's own sizes count too)")
	fs.Int64Var(&f.weights[1], "image-encoder-bytes", 0, "SVD's spelling of --condition-bytes (the image encoder)")
	fs.Int64Var(&f.weights[2], "vae-encoder-bytes", 0, "added to --condition-bytes (SVD's VAE encoder)")
	fs.Int64Var(&f.weights[3], "decode-bytes", 0, "decoder weight bytes, last stage only (at least; a model folder's own sizes count too)")
	fs.Int64Var(&f.weights[3], "vae-decoder-bytes", 0, "SVD's spelling of --decode-bytes (the VAE decoder)")
	fs.StringVar(&f.json, "json", "", "write the plan as JSON to this file")
	f.cache = cacheflag.Default()
	f.cache.Register(fs)
}

func (f *planFlags) workload() plan.Workload {
	return plan.Workload{Steps: f.steps, Samples: f.samples, Frames: f.frames, Height: f.height, Width: f.width,
		Channels: f.channels, Guided: f.maxGuidance > 1 || f.guidanceScale > 1, MicroBatch: f.microBatch, Warmup: f.warmup, DecodeRanks: f.decodeRanks}
}

// latentBytes is one item's latent: micro-batch x T x C x H x W float32s.
func (f *planFlags) latentBytes() int64 {
	return 4 * int64(max(1, f.microBatch)) * int64(f.frames) * int64(f.channels) * int64(f.height) * int64(f.width)
}

// launchSelf runs nproc copies of this executable with args through comm.Launch, their
// output on stderr.
func launchSelf(ctx context.Context, nproc int, args []string) error {
	return comm.Launch(ctx, comm.LaunchOptions{NProcPerNode: nproc, NNodes: 1, Command: args, Stdout: os.Stderr, Stderr: os.Stderr})
}

// runPlan is `vdpp plan`: predict every mesh of --devices devices and rank them.
func runPlan(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f planFlags
	fset := newFlags("plan", stdout, stderr)
	f.register(fset.FlagSet)
	fset.Alias("total-steps", "steps")
	fset.Deprecate("latent-frames", "--num-frames (video frames)")
	fset.Deprecate("latent-height", "--height (pixels: the latent's height times the VAE's factor)")
	fset.Deprecate("latent-width", "--width (pixels: the latent's width times the VAE's factor)")
	if err := parseFlags(fset, args); err != nil {
		return err
	}
	if err := f.resolveWorkload(); err != nil {
		return err
	}
	f.set = map[string]bool{}
	fset.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
	goal, err := plan.ParseGoal(f.goal)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	w := f.workload()
	if err := w.Validate(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	costs, err := f.costs(ctx, stderr)
	if err != nil {
		return err
	}
	if costs.Cache, err = f.cacheCosts(ctx, stderr, costs.Weights.ExpertSwitches); err != nil {
		return err
	}
	res, err := plan.Plan(plan.Request{Workload: w, Devices: f.devices, MemoryPerDevice: f.memory, Costs: costs, Goal: goal})
	if err != nil {
		return err
	}
	if err := plan.WriteTable(stdout, res); err != nil {
		return err
	}
	if best, ok := res.Best(); ok {
		cmds, err := f.commands(best)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "\nrun the best mesh (%s):\n", best.Mesh)
		for _, c := range cmds {
			fmt.Fprintf(stdout, "  %s\n", c)
		}
		// serve's workers run every mesh generate runs.
		c, err := f.serveCommand(best)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "  %s\n", c)
	}
	if f.json == "" {
		return nil
	}
	out, err := os.Create(f.json)
	if err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	if err := plan.WriteJSON(out, res); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// benchOptions is the workload as `vdpp bench` takes it: the model and the sizes (the
// model's where not given), its guidance.
func (f *planFlags) benchOptions() bench.Options {
	o := bench.DefaultOptions()
	o.Model, o.ModelDir, o.TotalSteps, o.NumSamples, o.MicroBatch = f.modelName, f.modelDir, f.steps, f.samples, f.microBatch
	o.NumFrames, o.Height, o.Width = f.numFrames, f.videoHeight, f.videoWidth
	o.LatentFrames, o.LatentChannels, o.LatentHeight, o.LatentWidth = f.frames, f.channels, f.height, f.width
	o.MinGuidance, o.MaxGuidance, o.GuidanceScale = f.minGuidance, f.maxGuidance, f.guidanceScale
	o.StepMS, o.Cost, o.HiddenChannels, o.Seed, o.Backend = f.stepMS, f.cost, f.hidden, f.seed, f.backend
	return o
}

// resolveWorkload resolves the workload through the model's family as bench does: the
// steps and the latent of the video's frames and size (the model's where not given); a
// family-specific flag the family does not read is refused.
func (f *planFlags) resolveWorkload() error {
	o := f.benchOptions()
	if err := o.Check(); err != nil {
		return err
	}
	o, err := o.Resolve()
	if err != nil {
		return err
	}
	f.steps, f.numFrames, f.videoHeight, f.videoWidth = o.TotalSteps, o.NumFrames, o.Height, o.Width
	f.frames, f.channels, f.height, f.width = o.LatentFrames, o.LatentChannels, o.LatentHeight, o.LatentWidth
	return nil
}

// cacheCosts are the costs of --cache's static schedule (nil without --cache): a reusing
// step's share of a full step, measured on the model when --measure (a cached call that
// reuses against one that computes), else the family's count of the operations it runs;
// and the state a hand-off carries.
func (f *planFlags) cacheCosts(ctx context.Context, stderr io.Writer, switches []int) (*plan.CacheCosts, error) {
	rule, err := f.cache.Rule()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	if !rule.On() {
		return nil, nil
	}
	m, err := resolveModel(f.modelName, f.modelDir)
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	if rule, err = m.ResolveCache(rule, f.steps); err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	if !rule.Static() {
		return nil, fmt.Errorf("%w: --cache %s decides which calls compute as the run goes, so no cut can be planned for it: plan a calibrated schedule, --cache static --cache-steps REPORT.json (a cached run's report)", errUsage, rule.Mode)
	}
	shape := []int{f.frames, f.channels, f.height, f.width}
	cost, err := m.CacheCost(rule, shape)
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	cc := &plan.CacheCosts{Rule: rule, ReuseFraction: cost.ReuseFraction, CutFraction: cost.ReuseFraction, StateBytes: cost.StateBytes}
	if f.measure && f.calibration == "" {
		s, err := m.Open(family.Options{Backend: f.backend, Roles: family.Roles{Denoise: true}, Sim: model.Config{
			StepMS: f.stepMS, Cost: f.cost, HiddenChannels: f.hidden, LatentChannels: f.channels, Seed: f.seed}})
		if err != nil {
			return nil, fmt.Errorf("plan: %w", err)
		}
		defer s.Close()
		st, err := s.Stepper(nil)
		if err != nil {
			return nil, fmt.Errorf("plan: %w", err)
		}
		calib := &plan.Calibrator{}
		if rc, ok := s.(family.RandomConditioner); ok {
			calib.Cond = rc.RandomConditioning(rand.New(rand.NewPCG(uint64(f.seed), 0)), shape)
		}
		frac, _, err := calib.MeasureReuse(ctx, st.ModelAt(0), shape, rule)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(stderr, "vdpp plan: a reusing call costs %.3f of a full one, measured (the family's operation count: %.3f)\n", frac, cc.ReuseFraction)
		cc.ReuseFraction = frac
	}
	return cc, nil
}

// resolveModel resolves a --model value through model/family; the deprecated
// --model NAME --model-dir DIR names the folder DIR.
func resolveModel(name, dir string) (family.Resolved, error) {
	if dir != "" {
		return family.Resolve(dir)
	}
	return family.Resolve(name)
}

// costs reads the calibration file, or measures (and saves it when a file is named), or
// takes the given values; then applies the flags that override.
func (f *planFlags) costs(ctx context.Context, stderr io.Writer) (plan.Costs, error) {
	shape := []int{f.frames, f.channels, f.height, f.width}
	var c plan.Costs
	var weights plan.Weights
	cal, err := plan.LoadCalibration(f.calibration)
	switch {
	case f.calibration != "" && err == nil:
		c = cal.Costs
		if cal.Model != f.modelName || fmt.Sprint(cal.LatentShape) != fmt.Sprint(shape) {
			fmt.Fprintf(stderr, "vdpp plan: note: %s was measured for %s at latent %v; planning %s at %v\n",
				f.calibration, cal.Model, cal.LatentShape, f.modelName, shape)
		}
		weights = c.Weights
	case f.calibration != "" && !errors.Is(err, fs.ErrNotExist):
		return plan.Costs{}, err
	case f.measure:
		m, err := resolveModel(f.modelName, f.modelDir)
		if err != nil {
			return plan.Costs{}, fmt.Errorf("plan: %w", err)
		}
		o := family.Options{Backend: f.backend, Roles: family.Roles{Denoise: true}, Sim: model.Config{
			StepMS: f.stepMS, Cost: f.cost, HiddenChannels: f.hidden, LatentChannels: f.channels, Seed: f.seed}}
		s, err := m.Open(o)
		if err != nil {
			return plan.Costs{}, fmt.Errorf("plan: %w", err)
		}
		defer s.Close()
		st, err := s.Stepper(nil)
		if err != nil {
			return plan.Costs{}, fmt.Errorf("plan: %w", err)
		}
		// The weights every stage holds, by role, as the family sizes them (a two-expert
		// model: dp holds both experts per device, a pipeline cut at the switch one).
		if weights, err = plan.FamilyWeights(m, o, f.steps, s); err != nil {
			return plan.Costs{}, fmt.Errorf("plan: %w", err)
		}
		d := st.ModelAt(0)
		calib := &plan.Calibrator{}
		if rc, ok := s.(family.RandomConditioner); ok {
			calib.Cond = rc.RandomConditioning(rand.New(rand.NewPCG(uint64(f.seed), 0)), shape)
		}
		cal, err := calib.Calibrate(ctx, f.modelName, d, shape, weights)
		if err != nil {
			return plan.Costs{}, err
		}
		if f.measureProcs && f.devices >= 2 {
			gap := plan.StepGap(f.workload(), cal.Costs.Step, f.devices)
			pc, err := (&plan.ProcessCalibrator{Launch: launchSelf, Gap: gap}).Measure(ctx, f.devices, f.latentBytes())
			if err != nil {
				return plan.Costs{}, err
			}
			cal.Costs = pc.Apply(cal.Costs)
			cal.Measurements = append(cal.Measurements, pc.Measurements...)
			for _, g := range pc.AllGathers {
				fmt.Fprintf(stderr, "vdpp plan: measured all-gather over %d processes: %.3f ms\n", g.Size, g.MS)
			}
		}
		c = cal.Costs
		fmt.Fprintf(stderr, "vdpp plan: measured step %.4f ms/row + %.4f ms/call, hand-off %.4f ms + %.0f bytes/s\n",
			c.Step.RowMS, c.Step.FixedMS, c.HandOff.LatencyMS, c.HandOff.BytesPerS)
		if f.calibration != "" {
			if err := plan.SaveCalibration(f.calibration, cal); err != nil {
				return plan.Costs{}, err
			}
		}
	default:
		if f.modelName != "synthetic" {
			return plan.Costs{}, fmt.Errorf("%w: --measure=false needs --model synthetic (or a --calibration file)", errUsage)
		}
		c = plan.SyntheticCosts(f.stepMS, f.frames, plan.Link{LatencyMS: f.handoffMS, BytesPerS: f.bandwidth})
	}
	if f.set["handoff-ms"] {
		c.HandOff.LatencyMS, c.Collective.LatencyMS = f.handoffMS, f.handoffMS
	}
	if f.set["bandwidth"] {
		c.HandOff.BytesPerS, c.Collective.BytesPerS = f.bandwidth, f.bandwidth
	}
	switch {
	case f.frameScaling >= 0:
		c.Step.FrameScaling = min(1, f.frameScaling)
	case f.modelName == "synthetic":
		c.Step.FrameScaling = 1
	}
	if c.Step.RefFrames < 1 {
		c.Step.RefFrames = f.frames
	}
	switch {
	case f.cpAllToAlls >= 0:
		c.CPAllToAllsPerStep = f.cpAllToAlls
	case f.modelName == "synthetic":
		c.CPAllToAllsPerStep = 0 // its cp step exchanges nothing but the output gather
	case c.CPAllToAllsPerStep == 0:
		c.CPAllToAllsPerStep = 1
	}
	if f.measureDecode {
		parts, partMS, err := measureDecode(ctx, f)
		if err != nil {
			return plan.Costs{}, err
		}
		c.DecodeParts, c.DecodePartMS = parts, partMS
		fmt.Fprintf(stderr, "vdpp plan: measured decode %d parts of %.1f ms per sample\n", parts, partMS)
	}
	if f.decodeParts > 0 {
		c.DecodeParts = f.decodeParts
	}
	if f.decodePartMS > 0 {
		c.DecodePartMS = f.decodePartMS
	}
	if f.prepareMS > 0 {
		c.PrepareMS = f.prepareMS
	}
	if f.finishMS > 0 {
		c.FinishMS = f.finishMS
	}
	c.Weights = weights
	if f.weights[0] >= 0 {
		c.Weights.Denoiser = f.weights[0]
		c.Weights.Experts, c.Weights.ExpertSwitches = nil, nil
	}
	c.Weights.Condition = max(c.Weights.Condition, f.weights[1]+f.weights[2])
	c.Weights.Decode = max(c.Weights.Decode, f.weights[3])
	return c, c.Validate()
}

// commands are the command lines that run the planned workload on mesh best: vdpp
// generate for a model that conditions and decodes (a model folder or builtin), and vdpp
// bench for every model. Every size, the steps and the guidance are given, so each runs
// what was planned whatever the defaults.
func (f *planFlags) commands(best plan.Prediction) ([]string, error) {
	m, err := resolveModel(f.modelName, f.modelDir)
	if err != nil {
		return nil, err
	}
	model := f.modelArg()
	mesh := fmt.Sprintf("--pp %d --cfg %d --cp %d --dp %d", best.PP, best.CFG, best.CP, best.DP)
	work := fmt.Sprintf("--steps %d --num-frames %d --height %d --width %d", f.steps, f.numFrames, f.videoHeight, f.videoWidth)
	if family.Reads(m.Family, "max_guidance") {
		work += fmt.Sprintf(" --min-guidance %g --max-guidance %g", f.minGuidance, f.maxGuidance)
	}
	if family.Reads(m.Family, "guidance_scale") {
		work += fmt.Sprintf(" --guidance-scale %g", f.guidanceScale)
	}
	samples := fmt.Sprintf("--num-samples %d", f.samples)
	if f.microBatch > 1 {
		samples += fmt.Sprintf(" --micro-batch %d", f.microBatch)
	}
	if f.decodeRanks > 1 {
		samples += fmt.Sprintf(" --decode-ranks %d", f.decodeRanks)
	}
	var cmds []string
	if m.Dir != "" {
		input := "--image IMAGE.png"
		if d, err := m.Describe(); err == nil && d.TextDim > 0 {
			input = `--prompt "..."`
		}
		cmds = append(cmds, fmt.Sprintf("vdpp generate --model %s %s %s %s %s", shellQuote(model), input, mesh, work, samples))
	}
	bench := fmt.Sprintf("vdpp bench --model %s %s %s %s", shellQuote(model), mesh, work, samples)
	if m.Dir == "" {
		bench += fmt.Sprintf(" --step-ms %g", f.stepMS)
	}
	return append(cmds, bench), nil
}

// serveCommand is the `vdpp serve` command line of mesh p for the planned model; the
// jobs, not the server, carry the steps, frames, size and guidance.
func (f *planFlags) serveCommand(p plan.Prediction) (string, error) {
	m, err := resolveModel(f.modelName, f.modelDir)
	if err != nil {
		return "", err
	}
	c := fmt.Sprintf("vdpp serve --model %s --pp %d", shellQuote(f.modelArg()), p.PP)
	if p.CFG > 1 {
		c += fmt.Sprintf(" --cfg %d", p.CFG)
	}
	if p.CP > 1 {
		c += fmt.Sprintf(" --cp %d", p.CP)
	}
	c += fmt.Sprintf(" --dp %d", p.DP)
	if f.microBatch > 1 {
		c += fmt.Sprintf(" --max-batch %d", f.microBatch)
	}
	if m.Dir == "" {
		c += fmt.Sprintf(" --step-ms %g", f.stepMS)
	}
	return c, nil
}

// modelArg is the --model value that names the planned model.
func (f *planFlags) modelArg() string {
	if f.modelDir != "" {
		return f.modelDir
	}
	return f.modelName
}

// shellQuote quotes s for a shell when it holds anything but safe characters.
func shellQuote(s string) string {
	for _, r := range s {
		if !(r == '/' || r == '.' || r == '-' || r == '_' || r == '@' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
		}
	}
	return s
}
