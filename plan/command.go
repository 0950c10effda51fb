package plan

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/vdpp/vdpp/internal/cacheflag"
	"github.com/vdpp/vdpp/internal/cli"
	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/tensor"
)

// Command is `vdpp plan`'s flags: the workload, the devices and the goal, where the costs
// come from (measured here, a calibration file, or given), and the report. Run plans it.
type Command struct {
	// Model is the --model value; ModelDir the deprecated --model svd --model-dir DIR.
	Model    string
	ModelDir string
	// Cost, HiddenChannels, Seed and StepMS configure the simulators (model.Config); Seed
	// also draws the conditioning of a measured step.
	Cost           string
	Backend        string
	HiddenChannels int
	Seed           int64
	StepMS         float64
	Steps          int // 0: the model's
	Samples        int
	MicroBatch     int
	Warmup         int
	// NumFrames, Height and Width are the video's (0: the model's); Resolve turns them into
	// the latent's LatentFrames, LatentChannels, LatentHeight and LatentWidth.
	NumFrames, Height, Width                                int
	LatentFrames, LatentChannels, LatentHeight, LatentWidth int
	MinGuidance, MaxGuidance, GuidanceScale                 float64
	// Schedule is the sampler and flow shift echoed into the printed commands
	// (--scheduler, --flow-shift); the step costs do not depend on it.
	Schedule        family.SchedulerChoice
	Devices         int
	Goal            string
	MemoryPerDevice int64
	// Calibration is a calibration file: read if it exists, else measured and written.
	Calibration      string
	Measure          bool
	MeasureProcesses bool
	HandoffMS        float64
	Bandwidth        float64
	PrepareMS        float64
	FinishMS         float64
	DecodeRanks      int
	DecodeParts      int
	DecodePartMS     float64
	MeasureDecode    bool
	MeasurePrepare   bool
	DecodeChunkSize  int
	CPAllToAlls      int
	FrameScaling     float64
	DenoiserBytes    int64 // -1: from the model
	ConditionBytes   int64
	VAEEncoderBytes  int64
	DecodeBytes      int64
	JSON             string
	Cache            cacheflag.Flags
	// Weights are the load options of the model's weights (--weights-dtype and the files):
	// what a measured model loads and what the family's sizes count.
	Weights family.WeightOptions
	// Launch starts the processes the collectives are measured between (nil: DefaultLaunch).
	Launch LaunchFunc
}

// DefaultCommand are `vdpp plan`'s defaults: the job vdpp generate runs with the same flags
// (one sample of the model's size, steps and guidance) on 7 devices, for throughput,
// measured here.
func DefaultCommand() Command {
	return Command{Cost: "sleep", HiddenChannels: 32, StepMS: 1, Samples: 1, MicroBatch: 1, Warmup: -1,
		MinGuidance: -1, MaxGuidance: -1, GuidanceScale: -1, Devices: 7, Goal: "throughput", Measure: true, MeasureProcesses: true,
		HandoffMS: 0.1, DecodeChunkSize: -1, CPAllToAlls: -1, FrameScaling: -1, DenoiserBytes: -1, Cache: cacheflag.Default()}
}

// RegisterFlags binds the command's options to fs, with c's current values as defaults.
func (c *Command) RegisterFlags(fs *cli.FlagSet) {
	fs.StringVar(&c.Model, "model", c.Model, "the model `NAME|DIR`: synthetic (the simulator, --step-ms per step), dummy, builtin, a model folder (its model_index.json picks the family) or ORG/NAME[@REV] from the local Hugging Face cache")
	fs.StringVar(&c.ModelDir, "model-dir", c.ModelDir, "deprecated: --model svd --model-dir DIR is --model DIR")
	fs.StringVar(&c.Cost, "cost", c.Cost, "synthetic model: sleep or spin")
	fs.StringVar(&c.Backend, "backend", c.Backend, "GoMLX backend for dummy/svd")
	c.Weights.RegisterFlags(fs.FlagSet)
	fs.IntVar(&c.HiddenChannels, "hidden-channels", c.HiddenChannels, "dummy model hidden channels")
	fs.Int64Var(&c.Seed, "seed", c.Seed, "dummy model weights seed")
	fs.Float64Var(&c.StepMS, "step-ms", c.StepMS, "synthetic model: cost of one sample-step in ms")
	fs.IntVar(&c.Steps, "steps", c.Steps, "denoising steps per sample (0: the model's)")
	fs.Alias("total-steps", "steps")
	fs.IntVar(&c.Samples, "num-samples", c.Samples, "samples to generate (as vdpp generate: 1)")
	fs.IntVar(&c.MicroBatch, "micro-batch", c.MicroBatch, "samples per denoiser call")
	fs.IntVar(&c.Warmup, "warmup-samples", c.Warmup, "first completions left out of the throughput window, as in vdpp bench (-1: 4, at most --num-samples - 2)")
	fs.IntVar(&c.NumFrames, "num-frames", c.NumFrames, "video frames per sample (0: the model's)")
	fs.IntVar(&c.Height, "height", c.Height, "video height; set with --width (0 and 0: the model's)")
	fs.IntVar(&c.Width, "width", c.Width, "video width; set with --height (0 and 0: the model's)")
	fs.IntVar(&c.LatentFrames, "latent-frames", c.LatentFrames, "deprecated: use --num-frames")
	fs.IntVar(&c.LatentChannels, "latent-channels", c.LatentChannels, "simulators: latent channels (0: 4; other models: their own)")
	fs.IntVar(&c.LatentHeight, "latent-height", c.LatentHeight, "deprecated: use --height")
	fs.IntVar(&c.LatentWidth, "latent-width", c.LatentWidth, "deprecated: use --width")
	fs.Deprecate("latent-frames", "--num-frames (video frames)")
	fs.Deprecate("latent-height", "--height (pixels: the latent's height times the VAE's factor)")
	fs.Deprecate("latent-width", "--width (pixels: the latent's width times the VAE's factor)")
	fs.Float64Var(&c.MinGuidance, "min-guidance", c.MinGuidance, "SVD and simulators: guidance weight of the first frame (-1: the model's, as vdpp generate; 1 for the simulators)")
	fs.Float64Var(&c.MaxGuidance, "max-guidance", c.MaxGuidance, "SVD and simulators: guidance weight of the last frame; > 1 is a guided run, cfg 2 possible (-1: the model's, as vdpp generate; 1 for the simulators)")
	fs.Float64Var(&c.GuidanceScale, "guidance-scale", c.GuidanceScale, "text-to-video models (Wan): CFG scale; > 1 is a guided run, cfg 2 possible (-1: the model's, as vdpp generate)")
	fs.StringVar(&c.Schedule.Scheduler, "scheduler", c.Schedule.Scheduler, "sampler `NAME` for the printed commands (the step costs do not depend on it; default: the folder's own)")
	fs.Float64Var(&c.Schedule.FlowShift, "flow-shift", c.Schedule.FlowShift, "flow models (Wan): the schedule's shift for the printed commands (0: the folder's)")
	fs.IntVar(&c.Devices, "devices", c.Devices, "devices (processes) to plan for: pp*cfg*cp*dp")
	fs.StringVar(&c.Goal, "goal", c.Goal, "rank meshes by latency or throughput")
	fs.Int64Var(&c.MemoryPerDevice, "memory-per-device", c.MemoryPerDevice, "memory of each device in bytes (0: no limit)")
	fs.StringVar(&c.Calibration, "calibration", c.Calibration, "calibration JSON: read if it exists, else measure and write it")
	fs.BoolVar(&c.Measure, "measure", c.Measure, "measure the step and hand-off costs here (false: use --step-ms, --handoff-ms, --bandwidth as given)")
	fs.BoolVar(&c.MeasureProcesses, "measure-processes", c.MeasureProcesses, "when measuring: also time all-gathers over 2..devices real processes and a 2-process hand-off (vdpp worker calibrate)")
	fs.Float64Var(&c.HandoffMS, "handoff-ms", c.HandoffMS, "latency of one hand-off or collective message, ms (given: overrides the measured or calibrated value)")
	fs.Float64Var(&c.Bandwidth, "bandwidth", c.Bandwidth, "link bandwidth in bytes/s, 0: unlimited (given: overrides the measured or calibrated value)")
	fs.Float64Var(&c.PrepareMS, "prepare-ms", c.PrepareMS, "conditioning cost per sample on stage 0, ms")
	fs.Float64Var(&c.FinishMS, "finish-ms", c.FinishMS, "decode cost per sample on the last stage, ms")
	fs.IntVar(&c.DecodeRanks, "decode-ranks", c.DecodeRanks, "stages sharing each sample's decode, as generate --decode-ranks (0 or 1: the last stage alone)")
	fs.IntVar(&c.DecodeParts, "decode-parts", c.DecodeParts, "decode parts (chunks) per sample (given: overrides the measured value)")
	fs.Float64Var(&c.DecodePartMS, "decode-part-ms", c.DecodePartMS, "decode cost of one part of one sample, ms (given: overrides the measured value)")
	fs.BoolVar(&c.MeasureDecode, "measure-decode", c.MeasureDecode, "time the model's VAE decode, part by part, on a latent of the workload's shape")
	fs.BoolVar(&c.MeasurePrepare, "measure-prepare", c.MeasurePrepare, "time the model's conditioning of one sample on stage 0 (an image-to-video model's image encoder and VAE encode) and plan with it")
	fs.IntVar(&c.DecodeChunkSize, "decode-chunk-size", c.DecodeChunkSize, "with --measure-decode: frames decoded together (0: all; -1: the model's)")
	fs.IntVar(&c.CPAllToAlls, "cp-all-to-alls", c.CPAllToAlls, "all-to-alls per step inside the model in a cp group (-1: from the calibration, else 0 for synthetic, 1 for others)")
	fs.Float64Var(&c.FrameScaling, "frame-scaling", c.FrameScaling, "share of the row cost proportional to frames, in [0,1] (-1: measured; 1 for synthetic, whose cost is per frame under cp)")
	fs.Int64Var(&c.DenoiserBytes, "denoiser-bytes", c.DenoiserBytes, "denoiser weight bytes (-1: from the model)")
	fs.Int64Var(&c.ConditionBytes, "condition-bytes", c.ConditionBytes, "conditioner weight bytes, stage 0 only (at least; a model folder's own sizes count too)")
	fs.Int64Var(&c.ConditionBytes, "image-encoder-bytes", c.ConditionBytes, "SVD's spelling of --condition-bytes (the image encoder)")
	fs.Int64Var(&c.VAEEncoderBytes, "vae-encoder-bytes", c.VAEEncoderBytes, "added to --condition-bytes (SVD's VAE encoder)")
	fs.Int64Var(&c.DecodeBytes, "decode-bytes", c.DecodeBytes, "decoder weight bytes, last stage only (at least; a model folder's own sizes count too)")
	fs.Int64Var(&c.DecodeBytes, "vae-decoder-bytes", c.DecodeBytes, "SVD's spelling of --decode-bytes (the VAE decoder)")
	fs.StringVar(&c.JSON, "json", c.JSON, "write the plan as JSON to this file")
	c.Cache.Register(fs.FlagSet)
}

// knobs are the options that set a family-specific parameter, and whether each differs
// from DefaultCommand: a family that does not read one refuses it.
func (c Command) knobs() []family.Knob {
	d := DefaultCommand()
	return []family.Knob{
		{Flag: "min-guidance", Param: "min_guidance", Set: c.MinGuidance != d.MinGuidance},
		{Flag: "max-guidance", Param: "max_guidance", Set: c.MaxGuidance != d.MaxGuidance},
		{Flag: "guidance-scale", Param: "guidance_scale", Set: c.GuidanceScale != d.GuidanceScale},
		{Flag: "decode-chunk-size", Param: "decode_chunk_size", Set: c.DecodeChunkSize != d.DecodeChunkSize},
	}
}

// resolveModel resolves --model through model/family; the deprecated --model NAME
// --model-dir DIR names the folder DIR.
func (c Command) resolveModel() (family.Resolved, error) {
	switch {
	case c.ModelDir != "":
		return family.Resolve(c.ModelDir)
	case c.Model == "":
		return family.Resolved{}, badOptions("--model is required: synthetic (the simulator; --step-ms sets its step cost), dummy, builtin or a model folder")
	}
	return family.Resolve(c.Model)
}

// statedCost reports whether the model's call costs exactly --step-ms
// (family.Description.StatedCost: the synthetic simulator), so its costs need no measuring.
func (c Command) statedCost() bool {
	m, err := c.resolveModel()
	if err != nil {
		return false
	}
	d, err := m.Describe()
	return err == nil && d.StatedCost
}

// simConfig is the simulators' configuration.
func (c Command) simConfig() model.Config {
	return model.Config{StepMS: c.StepMS, Cost: c.Cost, HiddenChannels: c.HiddenChannels, LatentChannels: c.LatentChannels, Seed: c.Seed}
}

// Resolve resolves the workload through the model's family: the steps and the latent of
// the video's frames and size (the model's where not given, ResolveShape); a
// family-specific flag the family does not read is refused.
func (c Command) Resolve() (Command, error) {
	m, err := c.resolveModel()
	if err != nil {
		return c, err
	}
	if err := family.RefuseUnread(m.Family, c.modelArg(), c.knobs()); err != nil {
		return c, badOptions("%w", err)
	}
	if c.Schedule != (family.SchedulerChoice{}) {
		desc, err := m.Describe()
		if err != nil {
			return c, err
		}
		if err := desc.CheckScheduler(c.Schedule); err != nil {
			return c, badOptions("--scheduler %q --flow-shift %v: %w", c.Schedule.Scheduler, c.Schedule.FlowShift, err)
		}
	}
	s, err := ResolveShape(m, c.simConfig(), Shape{Steps: c.Steps, NumFrames: c.NumFrames, Height: c.Height, Width: c.Width,
		LatentFrames: c.LatentFrames, LatentChannels: c.LatentChannels, LatentHeight: c.LatentHeight, LatentWidth: c.LatentWidth})
	if err != nil {
		return c, err
	}
	c.Steps, c.NumFrames, c.Height, c.Width = s.Steps, s.NumFrames, s.Height, s.Width
	c.LatentFrames, c.LatentChannels, c.LatentHeight, c.LatentWidth = s.LatentFrames, s.LatentChannels, s.LatentHeight, s.LatentWidth
	if c.Warmup < 0 {
		c.Warmup = max(0, min(4, c.Samples-2)) // as vdpp bench
	}
	return c.modelGuidance(m)
}

// modelGuidance fills the guidance left to the model (-1) as vdpp generate does: a model
// folder's defaults for the guidance its family reads, 1 (unguided) otherwise. One
// workload for `vdpp plan` and `generate --plan auto`: the model's defaults and the flags.
func (c Command) modelGuidance(m family.Resolved) (Command, error) {
	def := family.Params{MinGuidance: 1, MaxGuidance: 1, GuidanceScale: 1}
	if m.Dir != "" {
		d, err := m.Describe()
		if err != nil {
			return c, err
		}
		if family.Reads(m.Family, "max_guidance") {
			def.MinGuidance, def.MaxGuidance = d.Defaults.MinGuidance, d.Defaults.MaxGuidance
		}
		if family.Reads(m.Family, "guidance_scale") {
			def.GuidanceScale = d.Defaults.GuidanceScale
		}
	}
	if c.MinGuidance < 0 {
		c.MinGuidance = def.MinGuidance
	}
	if c.MaxGuidance < 0 {
		c.MaxGuidance = def.MaxGuidance
	}
	if c.GuidanceScale < 0 {
		c.GuidanceScale = def.GuidanceScale
	}
	return c, nil
}

// hugeStep is the working memory of one denoising step above which `vdpp plan` does not
// measure a step at the model's default sizes unasked: a released Wan's 832x480, 81 frames
// needs about 11 GiB and minutes per step on a CPU.
const hugeStep = 2 << 30

// refuseHugeMeasure refuses to measure a step at the model's default sizes when that step
// is huge and no size was given (given reports the flags on the command line): planning a
// job means giving its sizes, and the measurement would run for minutes without a word.
// The line names the sizes it would have used.
func (c Command) refuseHugeMeasure(given func(string) bool) error {
	if !c.Measure || c.Calibration != "" {
		return nil
	}
	for _, f := range []string{"num-frames", "height", "width", "latent-frames", "latent-height", "latent-width"} {
		if given(f) {
			return nil
		}
	}
	m, err := c.resolveModel()
	if err != nil || m.Dir == "" {
		return nil
	}
	s, err := m.Open(family.Options{})
	if err != nil {
		return nil // the measurement reports it
	}
	defer s.Close()
	est, ok := s.(family.ActivationEstimator)
	if !ok {
		return nil
	}
	p := s.DefaultParams()
	p.NumFrames, p.Height, p.Width, p.Steps = c.NumFrames, c.Height, c.Width, c.Steps
	p.GuidanceScale, p.MaxGuidance = c.GuidanceScale, c.MaxGuidance
	if b := est.StepActivationBytes(p); b > hugeStep {
		return badOptions("--model %s without --num-frames, --height, --width plans the model's own job, %d frames at %dx%d, %d steps, whose step needs about %s of working memory and takes minutes to measure on a CPU: give the sizes of the job to plan (or --measure=false with --step-ms)",
			c.modelArg(), c.NumFrames, c.Width, c.Height, c.Steps, Bytes(b))
	}
	return nil
}

// Workload is the planned workload (resolved: Resolve).
func (c Command) Workload() Workload {
	return Workload{Steps: c.Steps, Samples: c.Samples, Frames: c.LatentFrames, Height: c.LatentHeight, Width: c.LatentWidth,
		Channels: c.LatentChannels, Guided: c.MaxGuidance > 1 || c.GuidanceScale > 1, MicroBatch: c.MicroBatch, Warmup: c.Warmup, DecodeRanks: c.DecodeRanks}
}

// latentShape is one sample's latent [T, C, H, W].
func (c Command) latentShape() []int {
	return []int{c.LatentFrames, c.LatentChannels, c.LatentHeight, c.LatentWidth}
}

// latentBytes is one item's latent: micro-batch x T x C x H x W float32s.
func (c Command) latentBytes() int64 {
	return 4 * int64(max(1, c.MicroBatch)) * int64(c.LatentFrames) * int64(c.LatentChannels) * int64(c.LatentHeight) * int64(c.LatentWidth)
}

// Run is `vdpp plan`: it resolves the workload, gets the costs (measured here, a
// calibration file, or the flags; given(name) reports whether a flag was on the command
// line, as --handoff-ms and --bandwidth then override a measurement), predicts every mesh
// of --devices devices, and writes the ranked table with the commands that run the best
// mesh to stdout (and the plan as JSON to --json); what it measures goes to stderr.
func (c Command) Run(ctx context.Context, given func(string) bool, stdout, stderr io.Writer) error {
	c, err := c.Resolve()
	if err != nil {
		return err
	}
	if err := c.refuseHugeMeasure(given); err != nil {
		return err
	}
	goal, err := ParseGoal(c.Goal)
	if err != nil {
		return badOptions("%w", err)
	}
	w := c.Workload()
	if err := w.Validate(); err != nil {
		return badOptions("%w", err)
	}
	costs, err := c.costs(ctx, given, stderr)
	if err != nil {
		return err
	}
	if costs.Cache, err = c.cacheCosts(ctx, stderr); err != nil {
		return err
	}
	res, err := Plan(Request{Workload: w, Devices: c.Devices, MemoryPerDevice: c.MemoryPerDevice, Costs: costs, Goal: goal})
	if err != nil {
		return err
	}
	if err := WriteTable(stdout, res); err != nil {
		return err
	}
	if best, ok := res.Best(); ok {
		cmds, err := c.Commands(best)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "\nrun the best mesh (%s):\n", best.Mesh)
		for _, l := range cmds {
			fmt.Fprintf(stdout, "  %s\n", l)
		}
	}
	if c.JSON == "" {
		return nil
	}
	out, err := os.Create(c.JSON)
	if err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	if err := WriteJSON(out, res); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// cacheCosts are the costs of --cache's static schedule (nil without --cache): a reusing
// step's share of a full step, measured on the model when --measure (a cached call that
// reuses against one that computes), else the family's count of the operations it runs;
// and the state a hand-off carries.
func (c Command) cacheCosts(ctx context.Context, stderr io.Writer) (*CacheCosts, error) {
	rule, err := c.Cache.Rule()
	if err != nil {
		return nil, badOptions("%w", err)
	}
	if !rule.On() {
		return nil, nil
	}
	m, err := c.resolveModel()
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	if rule, err = m.ResolveCache(rule, c.Steps); err != nil {
		return nil, badOptions("%w", err)
	}
	if !rule.Static() {
		return nil, badOptions("--cache %s decides which calls compute as the run goes, so no cut can be planned for it: plan a calibrated schedule, --cache static --cache-steps REPORT.json (a cached run's report)", rule.Mode)
	}
	shape := c.latentShape()
	cost, err := m.CacheCost(rule, shape)
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	cc := &CacheCosts{Rule: rule, ReuseFraction: cost.ReuseFraction, CutFraction: cost.ReuseFraction, StateBytes: cost.StateBytes}
	if c.Measure && c.Calibration == "" {
		s, err := m.Open(family.Options{Backend: c.Backend, Roles: family.Roles{Denoise: true}, Sim: c.simConfig(), Weights: c.Weights})
		if err != nil {
			return nil, fmt.Errorf("plan: %w", err)
		}
		defer s.Close()
		st, err := s.Stepper(nil)
		if err != nil {
			return nil, fmt.Errorf("plan: %w", err)
		}
		calib := &Calibrator{}
		if rc, ok := s.(family.RandomConditioner); ok {
			calib.Cond = rc.RandomConditioning(rand.New(rand.NewPCG(uint64(c.Seed), 0)), shape)
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

// costs reads the calibration file, or measures (and saves it when a file is named), or
// takes the given values; then applies the flags that override.
func (c Command) costs(ctx context.Context, given func(string) bool, stderr io.Writer) (Costs, error) {
	shape := c.latentShape()
	stated := c.statedCost()
	var costs Costs
	var weights Weights
	cal, err := LoadCalibration(c.Calibration)
	switch {
	case c.Calibration != "" && err == nil:
		costs = cal.Costs
		if cal.Model != c.Model || fmt.Sprint(cal.LatentShape) != fmt.Sprint(shape) {
			fmt.Fprintf(stderr, "vdpp plan: note: %s was measured for %s at latent %v; planning %s at %v\n",
				c.Calibration, cal.Model, cal.LatentShape, c.Model, shape)
		}
		weights = costs.Weights
		// A model folder's weights are the family's sizes for these load options (the
		// calibration may have been measured with others: another --weights-dtype).
		if m, err := c.resolveModel(); err == nil {
			if _, ok := m.Family.(family.Weigher); ok {
				if weights, err = FamilyWeights(m, family.Options{Backend: c.Backend, Weights: c.Weights}, c.Steps, nil); err != nil {
					return Costs{}, fmt.Errorf("plan: %w", err)
				}
			}
		}
	case c.Calibration != "" && !errors.Is(err, fs.ErrNotExist):
		return Costs{}, err
	case c.Measure:
		m, err := c.resolveModel()
		if err != nil {
			return Costs{}, fmt.Errorf("plan: %w", err)
		}
		o := family.Options{Backend: c.Backend, Roles: family.Roles{Denoise: true}, Sim: c.simConfig(), Weights: c.Weights}
		s, err := m.Open(o)
		if err != nil {
			return Costs{}, fmt.Errorf("plan: %w", err)
		}
		defer s.Close()
		st, err := s.Stepper(nil)
		if err != nil {
			return Costs{}, fmt.Errorf("plan: %w", err)
		}
		// The weights every stage holds, by role, as the family sizes them (a two-expert
		// model: dp holds both experts per device, a pipeline cut at the switch one).
		if weights, err = FamilyWeights(m, o, c.Steps, s); err != nil {
			return Costs{}, fmt.Errorf("plan: %w", err)
		}
		d := st.ModelAt(0)
		calib := &Calibrator{}
		if rc, ok := s.(family.RandomConditioner); ok {
			calib.Cond = rc.RandomConditioning(rand.New(rand.NewPCG(uint64(c.Seed), 0)), shape)
		}
		cal, err := calib.Calibrate(ctx, c.Model, d, shape, weights)
		if err != nil {
			return Costs{}, err
		}
		if c.MeasureProcesses && c.Devices >= 2 {
			launch := c.Launch
			if launch == nil {
				launch = DefaultLaunch
			}
			gap := StepGap(c.Workload(), cal.Costs.Step, c.Devices)
			pc, err := (&ProcessCalibrator{Launch: launch, Gap: gap}).Measure(ctx, c.Devices, c.latentBytes())
			if err != nil {
				return Costs{}, err
			}
			cal.Costs = pc.Apply(cal.Costs)
			cal.Measurements = append(cal.Measurements, pc.Measurements...)
			for _, g := range pc.AllGathers {
				fmt.Fprintf(stderr, "vdpp plan: measured all-gather over %d processes: %.3f ms\n", g.Size, g.MS)
			}
		}
		costs = cal.Costs
		fmt.Fprintf(stderr, "vdpp plan: measured step %.4f ms/row + %.4f ms/call, hand-off %.4f ms + %.0f bytes/s\n",
			costs.Step.RowMS, costs.Step.FixedMS, costs.HandOff.LatencyMS, costs.HandOff.BytesPerS)
		if c.Calibration != "" {
			if err := SaveCalibration(c.Calibration, cal); err != nil {
				return Costs{}, err
			}
		}
	default:
		if !stated {
			return Costs{}, badOptions("--measure=false needs --model synthetic (or a --calibration file)")
		}
		costs = SyntheticCosts(c.StepMS, c.LatentFrames, Link{LatencyMS: c.HandoffMS, BytesPerS: c.Bandwidth})
	}
	if given("handoff-ms") {
		costs.HandOff.LatencyMS, costs.Collective.LatencyMS = c.HandoffMS, c.HandoffMS
	}
	if given("bandwidth") {
		costs.HandOff.BytesPerS, costs.Collective.BytesPerS = c.Bandwidth, c.Bandwidth
	}
	switch {
	case c.FrameScaling >= 0:
		costs.Step.FrameScaling = min(1, c.FrameScaling)
	case stated:
		costs.Step.FrameScaling = 1
	}
	if costs.Step.RefFrames < 1 {
		costs.Step.RefFrames = c.LatentFrames
	}
	switch {
	case c.CPAllToAlls >= 0:
		costs.CPAllToAllsPerStep = c.CPAllToAlls
	case stated:
		costs.CPAllToAllsPerStep = 0 // its cp step exchanges nothing but the output gather
	case costs.CPAllToAllsPerStep == 0:
		costs.CPAllToAllsPerStep = 1
	}
	if c.MeasureDecode {
		parts, partMS, err := c.measureDecode(ctx)
		if err != nil {
			return Costs{}, err
		}
		costs.DecodeParts, costs.DecodePartMS = parts, partMS
		fmt.Fprintf(stderr, "vdpp plan: measured decode %d parts of %.1f ms per sample\n", parts, partMS)
	}
	if c.DecodeParts > 0 {
		costs.DecodeParts = c.DecodeParts
	}
	if c.DecodePartMS > 0 {
		costs.DecodePartMS = c.DecodePartMS
	}
	if c.MeasurePrepare {
		ms, err := c.measurePrepare(ctx)
		if err != nil {
			return Costs{}, err
		}
		costs.PrepareMS = ms
		fmt.Fprintf(stderr, "vdpp plan: measured conditioning %.1f ms per sample\n", ms)
	}
	if c.PrepareMS > 0 {
		costs.PrepareMS = c.PrepareMS
	}
	if c.FinishMS > 0 {
		costs.FinishMS = c.FinishMS
	}
	costs.Weights = weights
	if c.DenoiserBytes >= 0 {
		costs.Weights.Denoiser = c.DenoiserBytes
		costs.Weights.Experts, costs.Weights.ExpertSwitches = nil, nil
	}
	costs.Weights.Condition = max(costs.Weights.Condition, c.ConditionBytes+c.VAEEncoderBytes)
	costs.Weights.Decode = max(costs.Weights.Decode, c.DecodeBytes)
	return costs, costs.Validate()
}

// measureDecode times the model's VAE decode of one random latent of the workload's shape,
// part by part (family.DecodePart): it returns the parts per sample and the mean part time
// in ms, after one untimed decode that compiles every part's shape.
func (c Command) measureDecode(ctx context.Context) (int, float64, error) {
	m, err := c.resolveModel()
	if err != nil {
		return 0, 0, fmt.Errorf("plan: %w", err)
	}
	s, err := m.Open(family.Options{Backend: c.Backend, Roles: family.Roles{Decode: true}, Weights: c.Weights})
	if err != nil {
		return 0, 0, fmt.Errorf("plan: --measure-decode: %w", err)
	}
	defer s.Close()
	p := s.DefaultParams()
	def := s.LatentShape(p)
	if len(def) != 4 || def[2] < 1 || def[3] < 1 {
		return 0, 0, fmt.Errorf("plan: --measure-decode: %s has no decoder", s.Family())
	}
	desc, err := m.Describe()
	if err != nil {
		return 0, 0, err
	}
	p.NumFrames = c.LatentFrames
	if fm := desc.FrameMultiple; fm > 0 {
		p.NumFrames = (c.LatentFrames-1)*fm + 1
	}
	p.Height, p.Width = c.LatentHeight*(p.Height/def[2]), c.LatentWidth*(p.Width/def[3])
	if c.DecodeChunkSize >= 0 {
		p.DecodeChunkSize = c.DecodeChunkSize
	}
	shape := c.latentShape()
	if got := s.LatentShape(p); !slices.Equal(got, shape) {
		return 0, 0, fmt.Errorf("plan: --measure-decode: the latent %v is not the model's %v for %d frames of %dx%d", shape, got, p.NumFrames, p.Width, p.Height)
	}
	lat := tensor.New(shape...)
	r := rand.New(rand.NewPCG(uint64(c.Seed), 1))
	for i := range lat.Data {
		lat.Data[i] = float32(r.NormFloat64())
	}
	parts := family.DecodeParts(s, p)
	var total time.Duration
	for pass := range 2 { // the first pass compiles
		for part := range parts {
			t0 := time.Now()
			if _, err := family.DecodePart(ctx, s, lat, p, part); err != nil {
				return 0, 0, fmt.Errorf("plan: --measure-decode: %w", err)
			}
			if pass == 1 {
				total += time.Since(t0)
			}
		}
	}
	return parts, float64(total.Microseconds()) / 1e3 / float64(parts), nil
}

// Commands are the command lines that run the planned workload on mesh best: vdpp
// generate for a model that conditions and decodes (a model folder or builtin), vdpp bench
// for every model, and vdpp serve (its jobs, not the server, carry the steps, frames, size
// and guidance). Every size, the steps and the guidance are given, so each runs what was
// planned whatever the defaults.
func (c Command) Commands(best Prediction) ([]string, error) {
	m, err := c.resolveModel()
	if err != nil {
		return nil, err
	}
	name := shellQuote(c.modelArg())
	for _, a := range c.Weights.Args() { // the load options each command takes the same way
		k, v, _ := strings.Cut(a, "=")
		name += " " + k + " " + shellQuote(v)
	}
	mesh := fmt.Sprintf("--pp %d --cfg %d --cp %d --dp %d", best.PP, best.CFG, best.CP, best.DP)
	work := fmt.Sprintf("--steps %d --num-frames %d --height %d --width %d", c.Steps, c.NumFrames, c.Height, c.Width)
	if family.Reads(m.Family, "max_guidance") {
		work += fmt.Sprintf(" --min-guidance %g --max-guidance %g", c.MinGuidance, c.MaxGuidance)
	}
	if family.Reads(m.Family, "guidance_scale") {
		work += fmt.Sprintf(" --guidance-scale %g", c.GuidanceScale)
	}
	if c.Schedule.Scheduler != "" {
		work += " --scheduler " + shellQuote(c.Schedule.Scheduler)
	}
	if c.Schedule.FlowShift != 0 {
		work += fmt.Sprintf(" --flow-shift %g", c.Schedule.FlowShift)
	}
	samples := fmt.Sprintf("--num-samples %d", c.Samples)
	if c.MicroBatch > 1 {
		samples += fmt.Sprintf(" --micro-batch %d", c.MicroBatch)
	}
	if c.DecodeRanks > 1 {
		samples += fmt.Sprintf(" --decode-ranks %d", c.DecodeRanks)
	}
	var cmds []string
	if m.Dir != "" {
		input := "--image IMAGE.png"
		if d, err := m.Describe(); err == nil {
			input = modelInputs(d)
		}
		cmds = append(cmds, fmt.Sprintf("vdpp generate --model %s %s %s %s %s", name, input, mesh, work, samples))
	}
	bench := fmt.Sprintf("vdpp bench --model %s %s %s %s", name, mesh, work, samples)
	if m.Dir == "" {
		bench += fmt.Sprintf(" --step-ms %g", c.StepMS)
	}
	// serve's workers run every mesh generate runs.
	serve := fmt.Sprintf("vdpp serve --model %s --pp %d", name, best.PP)
	if best.CFG > 1 {
		serve += fmt.Sprintf(" --cfg %d", best.CFG)
	}
	if best.CP > 1 {
		serve += fmt.Sprintf(" --cp %d", best.CP)
	}
	serve += fmt.Sprintf(" --dp %d", best.DP)
	if c.MicroBatch > 1 {
		serve += fmt.Sprintf(" --max-batch %d", c.MicroBatch)
	}
	if m.Dir == "" {
		serve += fmt.Sprintf(" --step-ms %g", c.StepMS)
	}
	return append(cmds, bench, serve), nil
}

// modelArg is the --model value that names the planned model.
func (c Command) modelArg() string {
	if c.ModelDir != "" {
		return c.ModelDir
	}
	return c.Model
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

// modelInputs are the input flags of a generate command line for a model that takes what d
// says: an image (and a last image) where it needs them, a prompt for a text model.
func modelInputs(d family.Description) string {
	var in []string
	if d.ImageNeed() == family.NeedRequired {
		in = append(in, "--image IMAGE.png")
	}
	if d.LastImage == family.NeedRequired {
		in = append(in, "--last-image LAST.png")
	}
	if d.TextDim > 0 {
		in = append(in, `--prompt "..."`)
	}
	return strings.Join(in, " ")
}
