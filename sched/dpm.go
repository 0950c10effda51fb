package sched

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
)

// DPMConfig mirrors the scheduler_config.json keys of diffusers' DPMSolverMultistepScheduler
// (v0.35.2) that DPMSolver implements: DPM-Solver++ with flow sigmas, as a flow-matching
// model (Wan) runs it. Keys it does not list are dropped when parsing; settings it does not
// implement are rejected by Validate with ErrUnsupported.
type DPMConfig struct {
	NumTrainTimesteps    int     `json:"num_train_timesteps"`
	SolverOrder          int     `json:"solver_order"`
	PredictionType       string  `json:"prediction_type"`
	AlgorithmType        string  `json:"algorithm_type"`
	SolverType           string  `json:"solver_type"`
	LowerOrderFinal      bool    `json:"lower_order_final"`
	EulerAtFinal         bool    `json:"euler_at_final"`
	UseFlowSigmas        bool    `json:"use_flow_sigmas"`
	FlowShift            float64 `json:"flow_shift"`
	FinalSigmasType      string  `json:"final_sigmas_type"`
	Thresholding         bool    `json:"thresholding"`
	UseKarrasSigmas      bool    `json:"use_karras_sigmas"`
	UseExponentialSigmas bool    `json:"use_exponential_sigmas"`
	UseBetaSigmas        bool    `json:"use_beta_sigmas"`
	UseLuLambdas         bool    `json:"use_lu_lambdas"`
	UseDynamicShifting   bool    `json:"use_dynamic_shifting"`
	VarianceType         *string `json:"variance_type"`
}

// FlowDPMConfig returns DPM++ 2M on flow sigmas: DPMSolverMultistepScheduler(
// prediction_type="flow_prediction", use_flow_sigmas=True, flow_shift=shift,
// num_train_timesteps=numTrain), the constructor's defaults otherwise (solver order 2,
// dpmsolver++, midpoint, lower_order_final, final sigma zero).
func FlowDPMConfig(numTrain int, shift float64) DPMConfig {
	return DPMConfig{
		NumTrainTimesteps: numTrain, SolverOrder: 2, PredictionType: PredFlow, AlgorithmType: "dpmsolver++",
		SolverType: "midpoint", LowerOrderFinal: true, UseFlowSigmas: true, FlowShift: shift, FinalSigmasType: "zero",
	}
}

// ParseDPMConfig parses a DPMSolverMultistepScheduler scheduler_config.json; absent keys take
// the constructor's defaults (with flow prediction, as DPMSolver implements only that). The
// result is validated.
func ParseDPMConfig(data []byte) (DPMConfig, error) {
	c := FlowDPMConfig(1000, 1)
	c.UseFlowSigmas = false
	c.PredictionType = PredEpsilon
	if err := json.Unmarshal(data, &c); err != nil {
		return DPMConfig{}, fmt.Errorf("sched: parse DPM-Solver scheduler config: %w", err)
	}
	if c.SolverType == "logrho" || c.SolverType == "bh1" || c.SolverType == "bh2" {
		c.SolverType = "midpoint" // as diffusers registers them
	}
	if c.AlgorithmType == "deis" {
		c.AlgorithmType = "dpmsolver++"
	}
	if err := c.Validate(); err != nil {
		return DPMConfig{}, err
	}
	return c, nil
}

// Validate reports malformed or unimplemented settings. Implemented: dpmsolver++ of order 1
// or 2 (midpoint or heun) with flow_prediction on flow sigmas, final sigma zero.
func (c DPMConfig) Validate() error {
	unsup := func(format string, a ...any) error {
		return fmt.Errorf("%w: DPM-Solver "+format, append([]any{ErrUnsupported}, a...)...)
	}
	switch {
	case c.NumTrainTimesteps < 2 || c.NumTrainTimesteps > maxTrainTimesteps:
		return fmt.Errorf("sched: DPM-Solver num_train_timesteps must be in [2, %d], got %d", maxTrainTimesteps, c.NumTrainTimesteps)
	case c.SolverOrder < 1 || c.SolverOrder > 3:
		return fmt.Errorf("sched: DPM-Solver solver_order must be 1, 2 or 3, got %d", c.SolverOrder)
	case c.SolverOrder == 3:
		return unsup("solver_order 3")
	case c.AlgorithmType != "dpmsolver++":
		return unsup("algorithm_type %q", c.AlgorithmType)
	case c.SolverType != "midpoint" && c.SolverType != "heun":
		return unsup("solver_type %q", c.SolverType)
	case c.PredictionType != PredFlow || !c.UseFlowSigmas:
		return unsup("prediction_type %q with use_flow_sigmas %v (only flow_prediction on flow sigmas)", c.PredictionType, c.UseFlowSigmas)
	case !(c.FlowShift > 0) || math.IsInf(c.FlowShift, 0):
		return fmt.Errorf("sched: DPM-Solver flow_shift must be > 0, got %v", c.FlowShift)
	case c.FinalSigmasType != "zero":
		return unsup("final_sigmas_type %q", c.FinalSigmasType)
	case c.Thresholding:
		return unsup("thresholding")
	case c.UseKarrasSigmas || c.UseExponentialSigmas || c.UseBetaSigmas || c.UseLuLambdas:
		return unsup("Karras, exponential, beta or Lu sigmas with flow sigmas")
	case c.UseDynamicShifting:
		return unsup("use_dynamic_shifting")
	case c.VarianceType != nil:
		return unsup("variance_type %q", *c.VarianceType)
	}
	return nil
}

// EDMDPMConfig mirrors the scheduler_config.json of diffusers' EDMDPMSolverMultistepScheduler
// (v0.35.2): DPM-Solver++ on EDM sigmas with the EDM preconditioning (c_in, c_skip, c_out
// from sigma_data, c_noise = 0.25·ln σ).
type EDMDPMConfig struct {
	SigmaMin          float64 `json:"sigma_min"`
	SigmaMax          float64 `json:"sigma_max"`
	SigmaData         float64 `json:"sigma_data"`
	SigmaSchedule     string  `json:"sigma_schedule"`
	NumTrainTimesteps int     `json:"num_train_timesteps"`
	PredictionType    string  `json:"prediction_type"`
	Rho               float64 `json:"rho"`
	SolverOrder       int     `json:"solver_order"`
	Thresholding      bool    `json:"thresholding"`
	AlgorithmType     string  `json:"algorithm_type"`
	SolverType        string  `json:"solver_type"`
	LowerOrderFinal   bool    `json:"lower_order_final"`
	EulerAtFinal      bool    `json:"euler_at_final"`
	FinalSigmasType   string  `json:"final_sigmas_type"`
}

// SVDDPMConfig returns DPM++ 2M Karras for a Stable Video Diffusion UNet whose Euler
// scheduler is cfg: EDMDPMSolverMultistepScheduler with the folder's sigma_min, sigma_max
// and prediction type, sigma_data 1 (SVD's c_in = 1/√(σ²+1), c_skip = 1/(σ²+1),
// c_out = −σ/√(σ²+1)), Karras sigmas with ρ = 7, and the constructor's defaults otherwise.
func SVDDPMConfig(cfg Config) EDMDPMConfig {
	c := EDMDPMConfig{
		SigmaMin: 0.002, SigmaMax: 80, SigmaData: 1, SigmaSchedule: "karras", NumTrainTimesteps: cfg.NumTrainTimesteps,
		PredictionType: cfg.PredictionType, Rho: karrasRho, SolverOrder: 2, AlgorithmType: "dpmsolver++",
		SolverType: "midpoint", LowerOrderFinal: true, FinalSigmasType: "zero",
	}
	if cfg.SigmaMin != nil {
		c.SigmaMin = *cfg.SigmaMin
	}
	if cfg.SigmaMax != nil {
		c.SigmaMax = *cfg.SigmaMax
	}
	return c
}

// ParseEDMDPMConfig parses an EDMDPMSolverMultistepScheduler scheduler_config.json; absent
// keys take the constructor's defaults. The result is validated.
func ParseEDMDPMConfig(data []byte) (EDMDPMConfig, error) {
	c := EDMDPMConfig{SigmaMin: 0.002, SigmaMax: 80, SigmaData: 0.5, SigmaSchedule: "karras", NumTrainTimesteps: 1000,
		PredictionType: PredEpsilon, Rho: 7, SolverOrder: 2, AlgorithmType: "dpmsolver++", SolverType: "midpoint",
		LowerOrderFinal: true, FinalSigmasType: "zero"}
	if err := json.Unmarshal(data, &c); err != nil {
		return EDMDPMConfig{}, fmt.Errorf("sched: parse EDM DPM-Solver scheduler config: %w", err)
	}
	if c.SolverType == "logrho" || c.SolverType == "bh1" || c.SolverType == "bh2" {
		c.SolverType = "midpoint"
	}
	if err := c.Validate(); err != nil {
		return EDMDPMConfig{}, err
	}
	return c, nil
}

// Validate reports malformed or unimplemented settings. Implemented: dpmsolver++ of order 1
// or 2 (midpoint or heun) on Karras sigmas, epsilon or v_prediction, final sigma zero or
// sigma_min.
func (c EDMDPMConfig) Validate() error {
	unsup := func(format string, a ...any) error {
		return fmt.Errorf("%w: EDM DPM-Solver "+format, append([]any{ErrUnsupported}, a...)...)
	}
	switch {
	case !(c.SigmaMin > 0 && c.SigmaMax > c.SigmaMin) || math.IsInf(c.SigmaMax, 0):
		return fmt.Errorf("sched: EDM DPM-Solver needs 0 < sigma_min < sigma_max, got %v, %v", c.SigmaMin, c.SigmaMax)
	case !(c.SigmaData > 0) || math.IsInf(c.SigmaData, 0):
		return fmt.Errorf("sched: EDM DPM-Solver sigma_data must be > 0, got %v", c.SigmaData)
	case !(c.Rho > 0) || math.IsInf(c.Rho, 0):
		return fmt.Errorf("sched: EDM DPM-Solver rho must be > 0, got %v", c.Rho)
	case c.NumTrainTimesteps < 1 || c.NumTrainTimesteps > maxTrainTimesteps:
		return fmt.Errorf("sched: EDM DPM-Solver num_train_timesteps must be in [1, %d], got %d", maxTrainTimesteps, c.NumTrainTimesteps)
	case c.SigmaSchedule != "karras":
		return unsup("sigma_schedule %q", c.SigmaSchedule)
	case c.PredictionType != PredEpsilon && c.PredictionType != PredVPrediction:
		return unsup("prediction_type %q", c.PredictionType)
	case c.SolverOrder < 1 || c.SolverOrder > 3:
		return fmt.Errorf("sched: EDM DPM-Solver solver_order must be 1, 2 or 3, got %d", c.SolverOrder)
	case c.SolverOrder == 3:
		return unsup("solver_order 3")
	case c.AlgorithmType != "dpmsolver++":
		return unsup("algorithm_type %q", c.AlgorithmType)
	case c.SolverType != "midpoint" && c.SolverType != "heun":
		return unsup("solver_type %q", c.SolverType)
	case c.FinalSigmasType != "zero" && c.FinalSigmasType != "sigma_min":
		return unsup("final_sigmas_type %q", c.FinalSigmasType)
	case c.Thresholding:
		return unsup("thresholding")
	}
	return nil
}

// DPMSolver is DPM-Solver++ (multistep, orders 1 and 2) as diffusers v0.35.2 runs it, in
// one of two forms: DPMSolverMultistepScheduler on flow sigmas (NewFlowDPM: α = 1 − σ, the
// model predicts the flow v and x̂0 = x − σ·v, integer model timesteps) or
// EDMDPMSolverMultistepScheduler (NewEDMDPM: α = 1, the EDM preconditioning, model
// timestep 0.25·ln σ). Each step converts the model output to x̂0, then takes a first-order
// step (the first, and the last where diffusers lowers the order) or a second-order step
// from this and the previous step's x̂0.
//
// It is immutable and safe for concurrent use. The previous x̂0 travels in State.Latent;
// the warm-up counter follows from the step index. The float32 operations follow the
// reference's order of 0-dim tensor arithmetic, with torch's SLEEF log and exp.
type DPMSolver struct {
	edm             bool
	order           int
	heun            bool
	lowerOrderFinal bool // applies below 15 steps, as in diffusers
	eulerAtFinal    bool
	finalZero       bool
	timesteps       []float32
	sigmas          []float32
	initSigma       float32
	// EDM preconditioning.
	sigmaData float32
	predV     bool
}

var _ Scheduler = (*DPMSolver)(nil)

// dpmX0Prev names the previous step's x̂0 in State.Latent.
const dpmX0Prev = "dpm_x0_prev"

// NewFlowDPM validates cfg and computes the schedule for numSteps steps (the flow-sigma
// schedule of UniPC's use_flow_sigmas, identical in diffusers).
func NewFlowDPM(cfg DPMConfig, numSteps int) (*DPMSolver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if numSteps < 1 || numSteps > cfg.NumTrainTimesteps {
		return nil, fmt.Errorf("sched: DPM-Solver num_inference_steps must be in [1, %d], got %d", cfg.NumTrainTimesteps, numSteps)
	}
	ts, s64 := flowSigmaSchedule(cfg.NumTrainTimesteps, cfg.FlowShift, numSteps)
	d := &DPMSolver{order: cfg.SolverOrder, heun: cfg.SolverType == "heun", lowerOrderFinal: cfg.LowerOrderFinal,
		eulerAtFinal: cfg.EulerAtFinal, finalZero: true, initSigma: 1,
		timesteps: make([]float32, numSteps), sigmas: make([]float32, numSteps+1)}
	for i, s := range s64 {
		d.sigmas[i] = float32(s)
		d.timesteps[i] = float32(ts[i])
	}
	return d, nil
}

// NewEDMDPM validates cfg and computes the schedule for numSteps steps: Karras sigmas over
// torch's float32 linspace ramp, timesteps 0.25·ln σ with torch's float32 log.
func NewEDMDPM(cfg EDMDPMConfig, numSteps int) (*DPMSolver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if numSteps < 1 || numSteps > maxTrainTimesteps {
		return nil, fmt.Errorf("sched: EDM DPM-Solver num_inference_steps must be in [1, %d], got %d", maxTrainTimesteps, numSteps)
	}
	d := &DPMSolver{edm: true, order: cfg.SolverOrder, heun: cfg.SolverType == "heun", lowerOrderFinal: cfg.LowerOrderFinal,
		eulerAtFinal: cfg.EulerAtFinal, finalZero: cfg.FinalSigmasType == "zero",
		timesteps: make([]float32, numSteps), sigmas: make([]float32, numSteps+1),
		initSigma: float32(math.Sqrt(cfg.SigmaMax*cfg.SigmaMax + 1)), sigmaData: float32(cfg.SigmaData),
		predV: cfg.PredictionType == PredVPrediction}
	// (max_inv_rho + ramp·(min_inv_rho − max_inv_rho)) ** rho: Python-float scalars cast
	// to float32 against torch's float32 ramp; the power is std::pow on each element.
	minInv, maxInv := math.Pow(cfg.SigmaMin, 1/cfg.Rho), math.Pow(cfg.SigmaMax, 1/cfg.Rho)
	diff, base := float32(minInv-maxInv), float32(maxInv)
	for i, r := range TorchLinspace(0, 1, numSteps) {
		v := base + float32(r*diff)
		s := float32(math.Pow(float64(v), cfg.Rho))
		d.sigmas[i] = s
		d.timesteps[i] = float32(0.25 * log32(s))
	}
	if !d.finalZero {
		d.sigmas[numSteps] = float32(cfg.SigmaMin)
	}
	return d, nil
}

// NumSteps implements Scheduler.
func (d *DPMSolver) NumSteps() int { return len(d.timesteps) }

// Sigma implements Scheduler (NumSteps gives the final sigma).
func (d *DPMSolver) Sigma(step int) float32 { return d.sigmas[step] }

// Timestep implements Scheduler.
func (d *DPMSolver) Timestep(step int) float32 { return d.timesteps[step] }

// Timesteps returns the model timesteps.
func (d *DPMSolver) Timesteps() []float32 { return slices.Clone(d.timesteps) }

// Sigmas returns the NumSteps()+1 float32 sigmas.
func (d *DPMSolver) Sigmas() []float32 { return slices.Clone(d.sigmas) }

// InitSigma implements Scheduler: 1 on flow sigmas, √(σ_max² + 1) for EDM (diffusers'
// init_noise_sigma).
func (d *DPMSolver) InitSigma() float32 { return d.initSigma }

// ScaleModelInput implements Scheduler: a copy on flow sigmas; EDM's c_in·x with
// c_in = 1/√(σ² + σ_data²).
func (d *DPMSolver) ScaleModelInput(dst, x []float32, step int) error {
	if len(dst) != len(x) {
		return fmt.Errorf("sched: DPM-Solver scale_model_input: dst has %d values, x %d", len(dst), len(x))
	}
	if step < 0 || step >= len(d.timesteps) {
		return fmt.Errorf("sched: DPM-Solver step %d outside [0, %d)", step, len(d.timesteps))
	}
	if !d.edm {
		copy(dst, x)
		return nil
	}
	cIn := 1 / sqrt32(d.den(d.sigmas[step]))
	for i, v := range x {
		dst[i] = v * cIn
	}
	return nil
}

// den is σ² + σ_data² in float32.
func (d *DPMSolver) den(s float32) float32 { return float32(s*s) + float32(d.sigmaData*d.sigmaData) }

// alphaSigma is _sigma_to_alpha_sigma_t.
func (d *DPMSolver) alphaSigma(s float32) (alpha, sigma float32) {
	if d.edm {
		return 1, s
	}
	return 1 - s, s
}

// lambda is log α − log σ of sigma s.
func (d *DPMSolver) lambda(s float32) float32 {
	a, sg := d.alphaSigma(s)
	return log32(a) - log32(sg)
}

// convert writes x̂0 of step into dst (convert_model_output).
func (d *DPMSolver) convert(dst, mo, x []float32, step int) {
	s := d.sigmas[step]
	if !d.edm {
		for i, v := range mo {
			dst[i] = x[i] - float32(s*v)
		}
		return
	}
	den := d.den(s)
	// c_skip = σ_data² / den is 1/den · σ_data² (torch's reflected division is reciprocal
	// then multiply); c_out = ∓σ·σ_data / √den.
	cSkip := float32(1/den) * float32(d.sigmaData*d.sigmaData)
	num := s
	if d.predV {
		num = -s
	}
	cOut := float32(num*d.sigmaData) / sqrt32(den)
	for i, v := range mo {
		dst[i] = float32(cSkip*x[i]) + float32(cOut*v)
	}
}

// firstOrder reports whether step takes a first-order step.
func (d *DPMSolver) firstOrder(step int) bool {
	n := len(d.timesteps)
	lowerFinal := step == n-1 && (d.eulerAtFinal || (d.lowerOrderFinal && n < 15) || d.finalZero)
	return d.order == 1 || step < 1 || lowerFinal
}

// Step writes the update of step into dst from the model output and the latent x, given the
// previous step's x̂0 (nil at step 0), and returns this step's x̂0 (a new slice). dst may
// alias modelOut or x.
func (d *DPMSolver) Step(dst, modelOut, x, prevX0 []float32, step int) ([]float32, error) {
	n := len(d.timesteps)
	if step < 0 || step >= n {
		return nil, fmt.Errorf("sched: DPM-Solver step %d outside [0, %d)", step, n)
	}
	if len(dst) != len(x) || len(modelOut) != len(x) {
		return nil, fmt.Errorf("sched: DPM-Solver step: lengths %d, %d, %d differ", len(dst), len(modelOut), len(x))
	}
	first := d.firstOrder(step)
	if !first && len(prevX0) != len(x) {
		return nil, fmt.Errorf("%w: DPM-Solver step %d needs the previous x0 (%d values for %d)", ErrBadState, step, len(prevX0), len(x))
	}
	m0 := make([]float32, len(x))
	d.convert(m0, modelOut, x, step)
	sT, s0 := d.sigmas[step+1], d.sigmas[step]
	alphaT, sigmaT := d.alphaSigma(sT)
	_, sigmaS0 := d.alphaSigma(s0)
	lambdaT, lambdaS0 := d.lambda(sT), d.lambda(s0)
	h := lambdaT - lambdaS0
	c1 := sigmaT / sigmaS0
	em1 := exp32(-h) - 1
	c2 := alphaT * em1
	if first {
		for i := range dst {
			dst[i] = float32(c1*x[i]) - float32(c2*m0[i])
		}
		return m0, nil
	}
	lambdaS1 := d.lambda(d.sigmas[step-1])
	r0 := (lambdaS0 - lambdaS1) / h
	invR0 := 1 / r0
	if d.heun {
		c3 := alphaT * (em1/h + 1)
		for i := range dst {
			d1 := float32(invR0 * (m0[i] - prevX0[i]))
			dst[i] = float32(c1*x[i]) - float32(c2*m0[i]) + float32(c3*d1)
		}
		return m0, nil
	}
	c3 := 0.5 * c2
	for i := range dst {
		d1 := float32(invR0 * (m0[i] - prevX0[i]))
		dst[i] = float32(c1*x[i]) - float32(c2*m0[i]) - float32(c3*d1)
	}
	return m0, nil
}

// Update implements Scheduler with Step: the previous x̂0 travels in State.Latent (absent
// before the second step and after the last).
func (d *DPMSolver) Update(dst, modelOut, x []float32, step int, prev State) (State, error) {
	var prevX0 []float32
	if step > 0 && d.order > 1 {
		v, ok := prev.Latent[dpmX0Prev]
		if !ok && !d.firstOrder(step) {
			return State{}, fmt.Errorf("%w: DPM-Solver step %d needs %s", ErrBadState, step, dpmX0Prev)
		}
		prevX0 = v
	}
	m0, err := d.Step(dst, modelOut, x, prevX0, step)
	if err != nil {
		return State{}, err
	}
	if d.order < 2 || step == len(d.timesteps)-1 {
		return State{}, nil
	}
	return State{Latent: map[string][]float32{dpmX0Prev: m0}}, nil
}
