package wan

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/sched"
)

// Scheduler classes a Wan folder's scheduler/scheduler_config.json may name.
const (
	UniPCClass     = "UniPCMultistepScheduler"
	FlowMatchClass = "FlowMatchEulerDiscreteScheduler"
)

// SchedulerConfigFile is the scheduler's config inside scheduler/.
const SchedulerConfigFile = "scheduler_config.json"

// SchedulerConfig is the folder's scheduler: its class and the config of that class.
type SchedulerConfig struct {
	Path      string
	Class     string
	UniPC     sched.UniPCConfig
	FlowMatch sched.FlowMatchConfig
}

// NumTrainTimesteps is the config's num_train_timesteps (the boundary's scale).
func (c SchedulerConfig) NumTrainTimesteps() int {
	if c.Class == FlowMatchClass {
		return c.FlowMatch.NumTrainTimesteps
	}
	return c.UniPC.NumTrainTimesteps
}

// ReadSchedulerConfig reads dir/scheduler/scheduler_config.json; an unknown class or an
// unsupported setting is an error naming the file.
func (f *Folder) ReadSchedulerConfig() (SchedulerConfig, error) {
	path := filepath.Join(f.ComponentDir(Scheduler), SchedulerConfigFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return SchedulerConfig{}, fmt.Errorf("%s: %w: %w", path, ErrFolder, err)
	}
	return ParseSchedulerConfig(path, data)
}

// ParseSchedulerConfig parses a scheduler_config.json (path names it in errors): its
// _class_name picks the scheduler, whose own parser and Validate check the rest.
func ParseSchedulerConfig(path string, data []byte) (SchedulerConfig, error) {
	var err error
	var head struct {
		Class string `json:"_class_name"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return SchedulerConfig{}, fmt.Errorf("%s: %w: %v", path, ErrFolder, err)
	}
	c := SchedulerConfig{Path: path, Class: head.Class}
	switch head.Class {
	case UniPCClass:
		if c.UniPC, err = sched.ParseUniPCConfig(data); err == nil {
			err = c.UniPC.Validate()
		}
	case FlowMatchClass:
		if c.FlowMatch, err = sched.ParseFlowMatchConfig(data); err == nil {
			err = c.FlowMatch.Validate()
		}
	default:
		err = fmt.Errorf("%w: _class_name %q is not %s or %s", ErrFolder, head.Class, UniPCClass, FlowMatchClass)
	}
	if err != nil {
		return SchedulerConfig{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// New returns the folder's own scheduler for steps inference steps, as WanPipeline sets it
// up (set_timesteps(steps), no dynamic shifting).
func (c SchedulerConfig) New(steps int) (sched.Scheduler, error) {
	return c.NewNamed("", 0, steps)
}

// Own is the name of the folder's own scheduler among sched.FlowSamplers: unipc, or euler
// for a FlowMatchEulerDiscreteScheduler folder.
func (c SchedulerConfig) Own() string {
	if c.Class == FlowMatchClass {
		return sched.NameEuler
	}
	return sched.NameUniPC
}

// FlowShift is the folder's flow shift (flow_shift of UniPC, shift of flow-match Euler).
func (c SchedulerConfig) FlowShift() float64 {
	if c.Class == FlowMatchClass {
		return c.FlowMatch.Shift
	}
	return c.UniPC.FlowShift
}

// Samplers are the samplers a Wan folder offers (sched.FlowSamplers), its own first.
func (c SchedulerConfig) Samplers() []sched.SamplerInfo {
	out := []sched.SamplerInfo{}
	for _, s := range sched.FlowSamplers {
		if s.Name == c.Own() {
			out = append([]sched.SamplerInfo{s}, out...)
		} else {
			out = append(out, s)
		}
	}
	return out
}

// NewNamed returns the sampler name of sched.FlowSamplers ("" for the folder's own) for
// steps inference steps with flow shift shift (0: the folder's), built as diffusers builds
// it from the folder's config:
//   - unipc: the folder's UniPCMultistepScheduler with flow_shift = shift (a flow-match
//     folder gets UniPC's defaults on flow sigmas);
//   - euler: FlowMatchEulerDiscreteScheduler with shift = shift (a flow-match folder's own
//     config otherwise);
//   - dpm++2m: DPMSolverMultistepScheduler(prediction_type="flow_prediction",
//     use_flow_sigmas=True, flow_shift=shift);
//   - lcm: FlowMatchLCMScheduler(shift=shift) on the step-distillation schedule
//     (sched.FlowLCM).
func (c SchedulerConfig) NewNamed(name string, shift float64, steps int) (sched.Scheduler, error) {
	if steps < 1 {
		return nil, fmt.Errorf("wan: %d inference steps", steps)
	}
	if name == "" {
		name = c.Own()
	}
	if shift == 0 {
		shift = c.FlowShift()
	}
	T := c.NumTrainTimesteps()
	wrap := func(sc sched.Scheduler, err error) (sched.Scheduler, error) {
		if err != nil {
			return nil, fmt.Errorf("%s: scheduler %s: %w", c.Path, name, err)
		}
		return sc, nil
	}
	switch name {
	case sched.NameUniPC:
		u := c.UniPC
		if c.Class == FlowMatchClass {
			u = sched.DefaultUniPCConfig()
			u.NumTrainTimesteps, u.PredictionType, u.UseFlowSigmas = T, sched.PredFlow, true
		}
		u.FlowShift = shift
		return wrap(sched.NewUniPC(u, steps))
	case sched.NameEuler:
		f := c.FlowMatch
		if c.Class != FlowMatchClass {
			f = sched.DefaultFlowMatchConfig()
			f.NumTrainTimesteps = T
		}
		f.Shift = shift
		return wrap(sched.NewFlowMatchEuler(f, steps, math.NaN()))
	case sched.NameDPM2M:
		return wrap(sched.NewFlowDPM(sched.FlowDPMConfig(T, shift), steps))
	case sched.NameLCM:
		return wrap(sched.NewFlowLCM(T, shift, steps))
	}
	return nil, fmt.Errorf("%w: scheduler %q: a Wan model offers %s, %s, %s or %s", family.ErrParams, name,
		sched.NameUniPC, sched.NameEuler, sched.NameDPM2M, sched.NameLCM)
}
