package sched

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
)

// ErrUnsupported is returned (wrapped) for scheduler settings this package does not
// implement, instead of silently producing different numbers.
var ErrUnsupported = errors.New("sched: unsupported scheduler setting")

// maxTrainTimesteps bounds num_train_timesteps so a corrupt config cannot make New
// allocate without limit.
const maxTrainTimesteps = 1 << 20

// Prediction types understood by Step.
const (
	PredEpsilon        = "epsilon"
	PredVPrediction    = "v_prediction"
	PredSample         = "sample"
	PredOriginalSample = "original_sample"
)

// Config mirrors diffusers' EulerDiscreteScheduler scheduler_config.json. Keys that the
// Euler scheduler ignores (clip_sample, set_alpha_to_one, skip_prk_steps, ...) are not
// represented and are ignored when parsing. SigmaMin / SigmaMax are pointers because the
// file may hold null (then the training sigma table supplies the endpoints).
type Config struct {
	NumTrainTimesteps    int      `json:"num_train_timesteps"`
	BetaStart            float64  `json:"beta_start"`
	BetaEnd              float64  `json:"beta_end"`
	BetaSchedule         string   `json:"beta_schedule"`
	TrainedBetas         []any    `json:"trained_betas"`
	PredictionType       string   `json:"prediction_type"`
	InterpolationType    string   `json:"interpolation_type"`
	UseKarrasSigmas      bool     `json:"use_karras_sigmas"`
	UseExponentialSigmas bool     `json:"use_exponential_sigmas"`
	UseBetaSigmas        bool     `json:"use_beta_sigmas"`
	SigmaMin             *float64 `json:"sigma_min"`
	SigmaMax             *float64 `json:"sigma_max"`
	TimestepSpacing      string   `json:"timestep_spacing"`
	TimestepType         string   `json:"timestep_type"`
	StepsOffset          int      `json:"steps_offset"`
	RescaleBetasZeroSNR  bool     `json:"rescale_betas_zero_snr"`
	FinalSigmasType      string   `json:"final_sigmas_type"`
}

// defaultConfig returns diffusers' EulerDiscreteScheduler constructor defaults, the
// values a key absent from scheduler_config.json takes.
func defaultConfig() Config {
	return Config{
		NumTrainTimesteps: 1000,
		BetaStart:         0.0001,
		BetaEnd:           0.02,
		BetaSchedule:      "linear",
		PredictionType:    PredEpsilon,
		InterpolationType: "linear",
		TimestepSpacing:   "linspace",
		TimestepType:      "discrete",
		StepsOffset:       0,
		FinalSigmasType:   "zero",
	}
}

// DefaultSVDConfig returns the scheduler configuration shipped with
// stabilityai/stable-video-diffusion-img2vid(-xt) (their scheduler/scheduler_config.json).
func DefaultSVDConfig() Config {
	c := defaultConfig()
	smin, smax := 0.002, 700.0
	c.BetaStart, c.BetaEnd, c.BetaSchedule = 0.00085, 0.012, "scaled_linear"
	c.PredictionType = PredVPrediction
	c.UseKarrasSigmas = true
	c.SigmaMin, c.SigmaMax = &smin, &smax
	c.TimestepSpacing = "leading"
	c.TimestepType = "continuous"
	c.StepsOffset = 1
	return c
}

// ParseConfig parses a scheduler_config.json document; absent keys take diffusers'
// defaults. It validates the result (see Config.Validate).
func ParseConfig(data []byte) (Config, error) {
	c := defaultConfig()
	if err := json.Unmarshal(data, &c); err != nil {
		return Config{}, fmt.Errorf("sched: parse scheduler config: %w", err)
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// LoadConfig reads and parses a scheduler_config.json file.
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("sched: load config: %w", err)
	}
	c, err := ParseConfig(data)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Validate reports settings that are malformed or not implemented. Supported: Karras
// sigmas (required), linear / scaled_linear betas, linspace / leading / trailing
// spacing, discrete or continuous timesteps, epsilon / v_prediction / sample
// prediction, final sigma "zero" or "sigma_min".
func (c Config) Validate() error {
	unsup := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrUnsupported}, a...)...)
	}
	switch {
	case c.NumTrainTimesteps < 2 || c.NumTrainTimesteps > maxTrainTimesteps:
		return fmt.Errorf("sched: num_train_timesteps must be in [2, %d], got %d", maxTrainTimesteps, c.NumTrainTimesteps)
	case !c.UseKarrasSigmas:
		return unsup("use_karras_sigmas=false (only the Karras schedule is implemented)")
	case c.UseExponentialSigmas || c.UseBetaSigmas:
		return unsup("use_exponential_sigmas / use_beta_sigmas")
	case c.RescaleBetasZeroSNR:
		return unsup("rescale_betas_zero_snr")
	case len(c.TrainedBetas) > 0:
		return unsup("trained_betas")
	}
	switch c.BetaSchedule {
	case "linear", "scaled_linear":
	default:
		return unsup("beta_schedule %q", c.BetaSchedule)
	}
	switch c.PredictionType {
	case PredEpsilon, PredVPrediction, PredSample, PredOriginalSample:
	default:
		return unsup("prediction_type %q", c.PredictionType)
	}
	switch c.TimestepSpacing {
	case "linspace", "leading", "trailing":
	default:
		return unsup("timestep_spacing %q", c.TimestepSpacing)
	}
	switch c.TimestepType {
	case "discrete", "continuous":
	default:
		return unsup("timestep_type %q", c.TimestepType)
	}
	switch c.FinalSigmasType {
	case "zero", "sigma_min":
	default:
		return unsup("final_sigmas_type %q", c.FinalSigmasType)
	}
	switch c.InterpolationType {
	case "linear":
	case "log_linear":
		// Only the Karras endpoints could depend on it; they do not when both are set.
		if c.SigmaMin == nil || c.SigmaMax == nil {
			return unsup("interpolation_type log_linear without sigma_min and sigma_max")
		}
	default:
		return unsup("interpolation_type %q", c.InterpolationType)
	}
	if c.SigmaMin != nil && c.SigmaMax != nil && !(*c.SigmaMin > 0 && *c.SigmaMax > *c.SigmaMin) {
		return fmt.Errorf("sched: need 0 < sigma_min < sigma_max, got %v, %v", *c.SigmaMin, *c.SigmaMax)
	}
	return nil
}

// continuousTimesteps reports whether model timesteps are 0.25·ln σ (diffusers applies
// this only for continuous timesteps with v-prediction).
func (c Config) continuousTimesteps() bool {
	return c.TimestepType == "continuous" && c.PredictionType == PredVPrediction
}
