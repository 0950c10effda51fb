package wan

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"

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

// New returns the scheduler for steps inference steps, as WanPipeline sets it up
// (set_timesteps(steps), no dynamic shifting).
func (c SchedulerConfig) New(steps int) (sched.Scheduler, error) {
	if steps < 1 {
		return nil, fmt.Errorf("wan: %d inference steps", steps)
	}
	switch c.Class {
	case FlowMatchClass:
		f, err := sched.NewFlowMatchEuler(c.FlowMatch, steps, math.NaN())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.Path, err)
		}
		return f, nil
	default:
		u, err := sched.NewUniPC(c.UniPC, steps)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.Path, err)
		}
		return u, nil
	}
}
