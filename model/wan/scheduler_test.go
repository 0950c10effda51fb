package wan

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/vdpp/vdpp/internal/shared"
)

func FuzzParseSchedulerConfig(f *testing.F) {
	f.Add([]byte(`{"_class_name": "UniPCMultistepScheduler", "prediction_type": "flow_prediction", "use_flow_sigmas": true, "flow_shift": 3.0}`))
	f.Add([]byte(`{"_class_name": "FlowMatchEulerDiscreteScheduler", "shift": 3.0}`))
	f.Add([]byte(`{"_class_name": "EulerDiscreteScheduler"}`))
	f.Add([]byte(`{`))
	if dir, err := shared.Path("golden", "wan-dev", "scheduler", SchedulerConfigFile); err == nil {
		if b, err := os.ReadFile(dir); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseSchedulerConfig("scheduler_config.json", data)
		if err != nil {
			if !errors.Is(err, ErrFolder) && c.Class != "" {
				t.Fatalf("error %v with a class %q", err, c.Class)
			}
			return
		}
		// A config that parses gives a schedule (or a clear error) for a few steps; huge
		// training schedules only cost time.
		if c.NumTrainTimesteps() > 100000 {
			return
		}
		for _, n := range []int{1, 2, 7} {
			if s, err := c.New(n); err == nil && s.NumSteps() != n {
				t.Fatalf("%d steps gave %d", n, s.NumSteps())
			}
		}
	})
}

// The dev folder's scheduler is UniPC with the real Wan 2.2 settings.
func TestReadSchedulerConfig(t *testing.T) {
	dir := shared.Require(t, "golden", "wan-dev")
	f, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := f.ReadSchedulerConfig()
	if err != nil {
		t.Fatal(err)
	}
	if c.Class != UniPCClass || c.NumTrainTimesteps() != 1000 || filepath.Base(c.Path) != SchedulerConfigFile {
		t.Fatalf("%+v", c)
	}
	if _, err := ParseSchedulerConfig("x.json", []byte(`{"_class_name": "DDIMScheduler"}`)); err == nil {
		t.Fatal("DDIM: want an error")
	}
}
