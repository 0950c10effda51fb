package sched

import (
	"encoding/json"
	"fmt"
	"os"
)

// PredFlow is the flow-matching prediction type (the model predicts noise − x0), as Wan's
// UniPC configuration names it.
const PredFlow = "flow_prediction"

// UniPCConfig mirrors the scheduler_config.json of diffusers' UniPCMultistepScheduler
// (v0.35.2). Keys this package ignores (dynamic_thresholding_ratio, sample_max_value,
// _class_name, ...) are dropped when parsing; settings it does not implement are rejected by
// Validate with ErrUnsupported.
type UniPCConfig struct {
	NumTrainTimesteps    int     `json:"num_train_timesteps"`
	BetaStart            float64 `json:"beta_start"`
	BetaEnd              float64 `json:"beta_end"`
	BetaSchedule         string  `json:"beta_schedule"`
	TrainedBetas         []any   `json:"trained_betas"`
	SolverOrder          int     `json:"solver_order"`
	PredictionType       string  `json:"prediction_type"`
	Thresholding         bool    `json:"thresholding"`
	PredictX0            bool    `json:"predict_x0"`
	SolverType           string  `json:"solver_type"`
	LowerOrderFinal      bool    `json:"lower_order_final"`
	DisableCorrector     []int   `json:"disable_corrector"`
	SolverP              any     `json:"solver_p"`
	UseKarrasSigmas      bool    `json:"use_karras_sigmas"`
	UseExponentialSigmas bool    `json:"use_exponential_sigmas"`
	UseBetaSigmas        bool    `json:"use_beta_sigmas"`
	UseFlowSigmas        bool    `json:"use_flow_sigmas"`
	FlowShift            float64 `json:"flow_shift"`
	TimestepSpacing      string  `json:"timestep_spacing"`
	StepsOffset          int     `json:"steps_offset"`
	FinalSigmasType      string  `json:"final_sigmas_type"`
	RescaleBetasZeroSNR  bool    `json:"rescale_betas_zero_snr"`
	UseDynamicShifting   bool    `json:"use_dynamic_shifting"`
	TimeShiftType        string  `json:"time_shift_type"`
}

// DefaultUniPCConfig returns the UniPCMultistepScheduler constructor defaults: the values
// keys absent from scheduler_config.json take.
func DefaultUniPCConfig() UniPCConfig {
	return UniPCConfig{
		NumTrainTimesteps: 1000,
		BetaStart:         0.0001,
		BetaEnd:           0.02,
		BetaSchedule:      "linear",
		SolverOrder:       2,
		PredictionType:    PredEpsilon,
		PredictX0:         true,
		SolverType:        "bh2",
		LowerOrderFinal:   true,
		FlowShift:         1.0,
		TimestepSpacing:   "linspace",
		FinalSigmasType:   "zero",
		TimeShiftType:     "exponential",
	}
}

// ParseUniPCConfig parses a UniPCMultistepScheduler scheduler_config.json; absent keys take
// diffusers' defaults. Solver types "midpoint", "heun" and "logrho" become "bh2", as
// diffusers registers them. The result is validated.
func ParseUniPCConfig(data []byte) (UniPCConfig, error) {
	c := DefaultUniPCConfig()
	if err := json.Unmarshal(data, &c); err != nil {
		return UniPCConfig{}, fmt.Errorf("sched: parse UniPC scheduler config: %w", err)
	}
	switch c.SolverType {
	case "midpoint", "heun", "logrho":
		c.SolverType = "bh2"
	}
	if err := c.Validate(); err != nil {
		return UniPCConfig{}, err
	}
	return c, nil
}

// LoadUniPCConfig reads and parses a UniPC scheduler_config.json file.
func LoadUniPCConfig(path string) (UniPCConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return UniPCConfig{}, fmt.Errorf("sched: load UniPC config: %w", err)
	}
	c, err := ParseUniPCConfig(data)
	if err != nil {
		return UniPCConfig{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// maxSolverOrder bounds solver_order: the history holds that many latents and the solver
// solves a system of that size.
const maxSolverOrder = 8

// Validate reports malformed or unimplemented settings. Supported: linear / scaled_linear /
// squaredcos_cap_v2 betas; epsilon, v_prediction, sample and flow_prediction (the last with
// predict_x0); solver orders 1..8 of type bh1 or bh2; flow, Karras, exponential or the
// training sigmas; linspace / leading / trailing spacing; final sigma "zero" or "sigma_min";
// dynamic shifting of flow sigmas with an exponential time shift. Not implemented:
// thresholding, solver_p, beta sigmas, trained_betas, rescale_betas_zero_snr.
func (c UniPCConfig) Validate() error {
	unsup := func(format string, a ...any) error {
		return fmt.Errorf("%w: UniPC "+format, append([]any{ErrUnsupported}, a...)...)
	}
	switch {
	case c.NumTrainTimesteps < 2 || c.NumTrainTimesteps > maxTrainTimesteps:
		return fmt.Errorf("sched: UniPC num_train_timesteps must be in [2, %d], got %d", maxTrainTimesteps, c.NumTrainTimesteps)
	case c.SolverOrder < 1 || c.SolverOrder > maxSolverOrder:
		return fmt.Errorf("sched: UniPC solver_order must be in [1, %d], got %d", maxSolverOrder, c.SolverOrder)
	case c.Thresholding:
		return unsup("thresholding")
	case c.SolverP != nil:
		return unsup("solver_p")
	case c.UseBetaSigmas:
		return unsup("use_beta_sigmas")
	case len(c.TrainedBetas) > 0:
		return unsup("trained_betas")
	case c.RescaleBetasZeroSNR:
		return unsup("rescale_betas_zero_snr")
	case c.UseKarrasSigmas && c.UseExponentialSigmas:
		return fmt.Errorf("sched: UniPC: only one of use_karras_sigmas, use_exponential_sigmas can be set")
	case c.UseFlowSigmas && !(c.FlowShift > 0):
		return fmt.Errorf("sched: UniPC flow_shift must be > 0, got %v", c.FlowShift)
	}
	switch c.BetaSchedule {
	case "linear", "scaled_linear", "squaredcos_cap_v2":
	default:
		return unsup("beta_schedule %q", c.BetaSchedule)
	}
	switch c.PredictionType {
	case PredEpsilon, PredVPrediction, PredSample:
	case PredFlow:
		if !c.PredictX0 {
			return fmt.Errorf("sched: UniPC prediction_type %q needs predict_x0", c.PredictionType)
		}
	default:
		return unsup("prediction_type %q", c.PredictionType)
	}
	switch c.SolverType {
	case "bh1", "bh2":
	default:
		return unsup("solver_type %q", c.SolverType)
	}
	switch c.TimestepSpacing {
	case "linspace", "leading", "trailing":
	default:
		return unsup("timestep_spacing %q", c.TimestepSpacing)
	}
	switch c.FinalSigmasType {
	case "zero", "sigma_min":
	default:
		return unsup("final_sigmas_type %q", c.FinalSigmasType)
	}
	if c.UseDynamicShifting && c.TimeShiftType != "exponential" {
		return unsup("time_shift_type %q with use_dynamic_shifting", c.TimeShiftType)
	}
	return nil
}
