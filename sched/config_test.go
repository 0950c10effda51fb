package sched

import (
	"math"
	"testing"
)

// FuzzParseConfig checks that arbitrary scheduler_config.json input never panics, and
// that any accepted config yields a well-formed schedule.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(`{"use_karras_sigmas": true, "prediction_type": "v_prediction", "timestep_type": "continuous", "sigma_min": 0.002, "sigma_max": 700}`), uint8(25))
	f.Add([]byte(`{"use_karras_sigmas": true, "timestep_spacing": "trailing", "num_train_timesteps": 10}`), uint8(3))
	f.Add([]byte(`{"use_karras_sigmas": true, "beta_schedule": "scaled_linear", "final_sigmas_type": "sigma_min"}`), uint8(1))
	f.Add([]byte(`null`), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, steps uint8) {
		cfg, err := ParseConfig(data)
		if err != nil {
			return
		}
		if cfg.NumTrainTimesteps > 5000 {
			return // keep each input fast; large tables are not more interesting
		}
		e, err := New(cfg, int(steps)%30+1)
		if err != nil {
			return
		}
		if len(e.Sigmas) != e.NumSteps()+1 || len(e.Timesteps) != e.NumSteps() {
			t.Fatalf("schedule lengths %d/%d for %d steps", len(e.Sigmas), len(e.Timesteps), e.NumSteps())
		}
		if cfg.SigmaMin != nil && cfg.SigmaMax != nil && cfg.FinalSigmasType == "zero" && e.Sigmas[e.NumSteps()] != 0 {
			t.Fatalf("final sigma %v", e.Sigmas[e.NumSteps()])
		}
		if cfg.SigmaMin != nil && cfg.SigmaMax != nil && !math.IsInf(float64(e.Sigmas[0]), 0) {
			if got, want := float64(e.Sigmas[0]), *cfg.SigmaMax; math.Abs(got-want) > 1e-5*want {
				t.Fatalf("sigma[0] = %v, want sigma_max %v", got, want)
			}
		}
	})
}
