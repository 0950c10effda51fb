package sched

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
)

// FlowMatchConfig mirrors the scheduler_config.json of diffusers'
// FlowMatchEulerDiscreteScheduler (v0.35.2). base_shift, max_shift and the image sequence
// lengths are kept for callers that compute mu; the scheduler itself only takes mu.
type FlowMatchConfig struct {
	NumTrainTimesteps    int      `json:"num_train_timesteps"`
	Shift                float64  `json:"shift"`
	UseDynamicShifting   bool     `json:"use_dynamic_shifting"`
	BaseShift            float64  `json:"base_shift"`
	MaxShift             float64  `json:"max_shift"`
	BaseImageSeqLen      int      `json:"base_image_seq_len"`
	MaxImageSeqLen       int      `json:"max_image_seq_len"`
	InvertSigmas         bool     `json:"invert_sigmas"`
	ShiftTerminal        *float64 `json:"shift_terminal"`
	UseKarrasSigmas      bool     `json:"use_karras_sigmas"`
	UseExponentialSigmas bool     `json:"use_exponential_sigmas"`
	UseBetaSigmas        bool     `json:"use_beta_sigmas"`
	TimeShiftType        string   `json:"time_shift_type"`
	StochasticSampling   bool     `json:"stochastic_sampling"`
}

// DefaultFlowMatchConfig returns the FlowMatchEulerDiscreteScheduler constructor defaults.
func DefaultFlowMatchConfig() FlowMatchConfig {
	return FlowMatchConfig{
		NumTrainTimesteps: 1000,
		Shift:             1.0,
		BaseShift:         0.5,
		MaxShift:          1.15,
		BaseImageSeqLen:   256,
		MaxImageSeqLen:    4096,
		TimeShiftType:     "exponential",
	}
}

// ParseFlowMatchConfig parses a FlowMatchEulerDiscreteScheduler scheduler_config.json;
// absent keys take diffusers' defaults. The result is validated.
func ParseFlowMatchConfig(data []byte) (FlowMatchConfig, error) {
	c := DefaultFlowMatchConfig()
	if err := json.Unmarshal(data, &c); err != nil {
		return FlowMatchConfig{}, fmt.Errorf("sched: parse flow-match scheduler config: %w", err)
	}
	if err := c.Validate(); err != nil {
		return FlowMatchConfig{}, err
	}
	return c, nil
}

// LoadFlowMatchConfig reads and parses a FlowMatchEulerDiscreteScheduler config file.
func LoadFlowMatchConfig(path string) (FlowMatchConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return FlowMatchConfig{}, fmt.Errorf("sched: load flow-match config: %w", err)
	}
	c, err := ParseFlowMatchConfig(data)
	if err != nil {
		return FlowMatchConfig{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Validate reports malformed or unimplemented settings. Not implemented: invert_sigmas,
// stochastic_sampling (it draws noise) and beta sigmas.
func (c FlowMatchConfig) Validate() error {
	unsup := func(what string) error { return fmt.Errorf("%w: flow-match %s", ErrUnsupported, what) }
	switch {
	case c.NumTrainTimesteps < 2 || c.NumTrainTimesteps > maxTrainTimesteps:
		return fmt.Errorf("sched: flow-match num_train_timesteps must be in [2, %d], got %d", maxTrainTimesteps, c.NumTrainTimesteps)
	case !(c.Shift > 0) || math.IsInf(c.Shift, 0):
		return fmt.Errorf("sched: flow-match shift must be > 0, got %v", c.Shift)
	case c.InvertSigmas:
		return unsup("invert_sigmas")
	case c.StochasticSampling:
		return unsup("stochastic_sampling")
	case c.UseBetaSigmas:
		return unsup("use_beta_sigmas")
	case c.UseKarrasSigmas && c.UseExponentialSigmas:
		return fmt.Errorf("sched: flow-match: only one of use_karras_sigmas, use_exponential_sigmas can be set")
	case c.ShiftTerminal != nil && (*c.ShiftTerminal >= 1 || math.IsNaN(*c.ShiftTerminal)):
		return fmt.Errorf("sched: flow-match shift_terminal must be < 1, got %v", *c.ShiftTerminal)
	}
	switch c.TimeShiftType {
	case "exponential", "linear":
	default:
		return unsup(fmt.Sprintf("time_shift_type %q", c.TimeShiftType))
	}
	return nil
}

// FlowMatchSchedule is FlowMatchEulerDiscreteScheduler(config).set_timesteps(numSteps,
// mu=mu) as a pure function: float32 timesteps (σ·T in float32, not integers) and the
// numSteps+1 float32 sigmas ending in 0. mu is required exactly when use_dynamic_shifting is
// set (pass NaN otherwise). The constructor's float32 training schedule gives σmax and σmin
// (shifted once there, and shifted again here, as diffusers does); the rest is float64
// numpy arithmetic, so both outputs are exact.
func FlowMatchSchedule(c FlowMatchConfig, numSteps int, mu float64) (timesteps, sigmas []float32, err error) {
	if err := c.Validate(); err != nil {
		return nil, nil, err
	}
	if numSteps < 1 || numSteps > c.NumTrainTimesteps {
		return nil, nil, fmt.Errorf("sched: flow-match num_inference_steps must be in [1, %d], got %d", c.NumTrainTimesteps, numSteps)
	}
	if c.UseDynamicShifting != !math.IsNaN(mu) {
		return nil, nil, fmt.Errorf("sched: flow-match: mu must be given exactly when use_dynamic_shifting is set (mu %v)", mu)
	}
	T := c.NumTrainTimesteps
	// __init__: float32 sigmas k/T for k = T..1, shifted in float32 unless dynamic.
	trainSigma := func(k int) float32 {
		s := float32(k) / float32(T)
		if c.UseDynamicShifting {
			return s
		}
		return float32(c.Shift) * s / (float32(float32(c.Shift-1)*s) + 1)
	}
	sigmaMax, sigmaMin := float64(trainSigma(T)), float64(trainSigma(1))
	ts := npLinspace(sigmaMax*float64(T), sigmaMin*float64(T), numSteps)
	s64 := make([]float64, numSteps)
	for i, t := range ts {
		s := t / float64(T)
		switch {
		case !c.UseDynamicShifting:
			s64[i] = flowShift(c.Shift, s)
		case c.TimeShiftType == "exponential":
			s64[i] = timeShiftExponential(mu, s)
		default:
			s64[i] = timeShiftLinear(mu, s)
		}
	}
	if c.ShiftTerminal != nil && *c.ShiftTerminal != 0 {
		scale := (1 - s64[numSteps-1]) / (1 - *c.ShiftTerminal)
		for i, s := range s64 {
			s64[i] = 1 - ((1 - s) / scale)
		}
	}
	switch {
	case c.UseKarrasSigmas:
		s64 = karrasSigmas(s64[numSteps-1], s64[0], numSteps)
	case c.UseExponentialSigmas:
		s64 = exponentialSigmas(s64[numSteps-1], s64[0], numSteps)
	}
	sigmas = make([]float32, numSteps+1)
	timesteps = make([]float32, numSteps)
	for i, s := range s64 {
		sigmas[i] = float32(s)
		timesteps[i] = sigmas[i] * float32(T)
	}
	return timesteps, sigmas, nil
}

// FlowMatchEuler is diffusers' FlowMatchEulerDiscreteScheduler after set_timesteps, without
// stochastic sampling: x ← x + (σnext − σ)·v in float32. It is immutable and safe for
// concurrent use; the step index lives in a FlowMatchState.
type FlowMatchEuler struct {
	cfg       FlowMatchConfig
	timesteps []float32
	sigmas    []float32
}

// NewFlowMatchEuler validates cfg and computes the schedule for numSteps steps; mu is
// set_timesteps' mu for use_dynamic_shifting configs and NaN otherwise.
func NewFlowMatchEuler(cfg FlowMatchConfig, numSteps int, mu float64) (*FlowMatchEuler, error) {
	ts, sig, err := FlowMatchSchedule(cfg, numSteps, mu)
	if err != nil {
		return nil, err
	}
	return &FlowMatchEuler{cfg: cfg, timesteps: ts, sigmas: sig}, nil
}

// Config returns the configuration the schedule was built from.
func (f *FlowMatchEuler) Config() FlowMatchConfig { return f.cfg }

// NumSteps returns the number of denoising steps.
func (f *FlowMatchEuler) NumSteps() int { return len(f.timesteps) }

// Timesteps returns the float32 model timesteps.
func (f *FlowMatchEuler) Timesteps() []float32 { return slices.Clone(f.timesteps) }

// Sigmas returns the NumSteps()+1 float32 sigmas; the last is 0.
func (f *FlowMatchEuler) Sigmas() []float32 { return slices.Clone(f.sigmas) }

// FlowMatchState is the flow-match Euler scheduler's only mutable state: the step index.
type FlowMatchState struct {
	// StepIndex is the index of the next step; -1 before the first, which then takes it
	// from its timestep.
	StepIndex int
}

// NewState returns the state before the first step.
func (f *FlowMatchEuler) NewState() *FlowMatchState { return &FlowMatchState{StepIndex: -1} }

// Step returns sample + (σ[i+1] − σ[i])·modelOutput as a new slice and advances st. On a
// fresh state the step index is that of timestep t (the second match if t occurs twice);
// a t not in the schedule is an error there, as in diffusers.
func (f *FlowMatchEuler) Step(st *FlowMatchState, modelOutput []float32, t float32, sample []float32) ([]float32, error) {
	if len(modelOutput) != len(sample) {
		return nil, fmt.Errorf("sched: flow-match step: model output has %d values, sample %d", len(modelOutput), len(sample))
	}
	if st.StepIndex < 0 {
		var hits []int
		for i, s := range f.timesteps {
			if s == t {
				hits = append(hits, i)
			}
		}
		switch len(hits) {
		case 0:
			return nil, fmt.Errorf("sched: flow-match step: timestep %v is not in the schedule", t)
		case 1:
			st.StepIndex = hits[0]
		default:
			st.StepIndex = hits[1]
		}
	}
	i := st.StepIndex
	if i >= len(f.timesteps) {
		return nil, fmt.Errorf("sched: flow-match step index %d is past the last of %d steps", i, len(f.timesteps))
	}
	dt := f.sigmas[i+1] - f.sigmas[i]
	out := make([]float32, len(sample))
	for e := range out {
		out[e] = sample[e] + float32(dt*modelOutput[e])
	}
	st.StepIndex++
	return out, nil
}

// flowMatchStateMagic starts a binary FlowMatchState (version 1).
const flowMatchStateMagic = "vdpp.flowmatch.v1\x00"

// MarshalBinary encodes s: the magic and the step index as a little-endian int64.
func (s *FlowMatchState) MarshalBinary() ([]byte, error) {
	return binary.LittleEndian.AppendUint64([]byte(flowMatchStateMagic), uint64(int64(s.StepIndex))), nil
}

// UnmarshalBinary decodes what MarshalBinary wrote.
func (s *FlowMatchState) UnmarshalBinary(data []byte) error {
	n := len(flowMatchStateMagic)
	if len(data) != n+8 || string(data[:n]) != flowMatchStateMagic {
		return fmt.Errorf("%w: not a flow-match state", ErrBadState)
	}
	v := int64(binary.LittleEndian.Uint64(data[n:]))
	if v < -1 || v > math.MaxInt32 {
		return fmt.Errorf("%w: step index %d", ErrBadState, v)
	}
	s.StepIndex = int(v)
	return nil
}
