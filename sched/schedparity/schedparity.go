// Package schedparity checks the schedulers of package sched against reference cases
// executed with diffusers (scripts/wanref/scheduler_cases.py): a case folder holds case.json
// (args.scheduler: the diffusers class; args.config: its scheduler_config.json keys,
// args.num_inference_steps, optional args.mu), inputs.safetensors (sample,
// model_output_step{i}, and noise_step{i} for the schedulers that draw noise) and
// outputs.safetensors (timesteps, sigmas, sample_step{i} = the sample after step i, each
// step fed the previous step's output; for the schedulers added with scheduler choice also
// model_input_step{i}, the scaled model input of step i, and init_noise_sigma).
//
// The classes run: UniPCMultistepScheduler and FlowMatchEulerDiscreteScheduler (sched.UniPC,
// sched.FlowMatchEuler), DPMSolverMultistepScheduler on flow sigmas and
// EDMDPMSolverMultistepScheduler (sched.DPMSolver), FlowMatchLCMScheduler on the
// step-distillation schedule (sched.FlowLCM), EulerDiscreteScheduler (sched.Euler) and
// EulerAncestralDiscreteScheduler's step on the Euler schedule (sched.EulerAncestral).
//
// Contract: every tensor in a case's outputs is compared, and an output the runner does not
// know is a failure, never a skip. timesteps and sigmas must agree within ScheduleULPLimit
// ulp (the Go schedule is meant to be exact; MaxULP shows it), samples and model inputs
// within relative L2 RelL2Limit. Reading the case is the only I/O; errors are returned for
// unreadable or malformed cases, results for everything that could be compared.
package schedparity

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/vdpp/vdpp/internal/paritycheck"
	"github.com/vdpp/vdpp/sched"
)

// Limits.
const (
	RelL2Limit       = 1e-6
	ScheduleULPLimit = 1
)

var (
	sampleLimit   = paritycheck.Limit{RelL2: RelL2Limit}
	scheduleLimit = paritycheck.Limit{ULP: ScheduleULPLimit}
)

// ErrCase is returned (wrapped) for a case folder that cannot be run.
var ErrCase = errors.New("schedparity: bad case")

// Result is one compared tensor (the fields of the SVD parity report).
type Result = paritycheck.Result

// IsSchedulerCase reports whether a case name is one CheckCase runs.
func IsSchedulerCase(name string) bool {
	return strings.HasPrefix(name, "scheduler_")
}

// CheckCase runs the case in dir with the scheduler its name (or args.scheduler) names.
func CheckCase(dir string) ([]Result, error) {
	c, err := readCase(dir)
	if err != nil {
		return nil, err
	}
	switch c.scheduler() {
	case "UniPCMultistepScheduler":
		return checkUniPC(c)
	case "FlowMatchEulerDiscreteScheduler":
		return checkFlowMatch(c)
	case "DPMSolverMultistepScheduler", "EDMDPMSolverMultistepScheduler", "FlowMatchLCMScheduler",
		"EulerDiscreteScheduler", "EulerAncestralDiscreteScheduler":
		return checkScheduler(c)
	}
	return nil, fmt.Errorf("%w: %s: not a scheduler case", ErrCase, dir)
}

// noisy is a scheduler whose step takes its noise explicitly.
type noisy interface {
	StepNoise(dst, modelOut, x, noise []float32, step int) error
}

// checkScheduler runs a case through the sched.Scheduler the class maps to: its schedule,
// its scaled model input and its steps (those of a scheduler that draws noise fed the
// recorded noise).
func checkScheduler(c *caseData) ([]Result, error) {
	bad := func(err error) ([]Result, error) { return nil, fmt.Errorf("%w: %s: %w", ErrCase, c.dir, err) }
	var sc sched.Scheduler
	n := c.Args.Steps
	switch c.scheduler() {
	case "DPMSolverMultistepScheduler":
		cfg, err := sched.ParseDPMConfig(c.Args.Config)
		if err != nil {
			return bad(err)
		}
		if sc, err = sched.NewFlowDPM(cfg, n); err != nil {
			return bad(err)
		}
	case "EDMDPMSolverMultistepScheduler":
		cfg, err := sched.ParseEDMDPMConfig(c.Args.Config)
		if err != nil {
			return bad(err)
		}
		if sc, err = sched.NewEDMDPM(cfg, n); err != nil {
			return bad(err)
		}
	case "FlowMatchLCMScheduler":
		cfg, err := sched.ParseFlowMatchConfig(c.Args.Config)
		if err != nil {
			return bad(err)
		}
		if sc, err = sched.NewFlowLCM(cfg.NumTrainTimesteps, cfg.Shift, n); err != nil {
			return bad(err)
		}
	case "EulerDiscreteScheduler", "EulerAncestralDiscreteScheduler":
		cfg, err := sched.ParseConfig(c.Args.Config)
		if err != nil {
			return bad(err)
		}
		if c.scheduler() == "EulerDiscreteScheduler" {
			sc, err = sched.New(cfg, n)
		} else {
			sc, err = sched.NewEulerAncestral(cfg, n)
		}
		if err != nil {
			return bad(err)
		}
	}
	ts, sig := make([]float32, sc.NumSteps()), make([]float32, sc.NumSteps()+1)
	for i := range ts {
		ts[i], sig[i] = sc.Timestep(i), sc.Sigma(i)
	}
	sig[len(ts)] = sc.Sigma(len(ts))
	got := map[string][]float32{"init_noise_sigma": {sc.InitSigma()}}
	var state sched.State
	st := stepper{timesteps: ts, sigmas: sig, step: func(i int, mo, x []float32) ([]float32, error) {
		in := make([]float32, len(x))
		if err := sc.ScaleModelInput(in, x, i); err != nil {
			return nil, err
		}
		got[fmt.Sprintf("model_input_step%d", i)] = in
		out := make([]float32, len(x))
		if nz, ok := sc.(noisy); ok {
			noise, ok := c.inputs[fmt.Sprintf("noise_step%d", i)]
			if !ok {
				return nil, fmt.Errorf("inputs lack noise_step%d", i)
			}
			return out, nz.StepNoise(out, mo, x, noise.data, i)
		}
		var err error
		state, err = sc.Update(out, mo, x, i, state)
		return out, err
	}}
	return c.runWith(st, got)
}

// CheckUniPCCase runs a UniPCMultistepScheduler case.
func CheckUniPCCase(dir string) ([]Result, error) {
	c, err := readCase(dir)
	if err != nil {
		return nil, err
	}
	return checkUniPC(c)
}

// CheckFlowMatchCase runs a FlowMatchEulerDiscreteScheduler case.
func CheckFlowMatchCase(dir string) ([]Result, error) {
	c, err := readCase(dir)
	if err != nil {
		return nil, err
	}
	return checkFlowMatch(c)
}

// stepper is the part of a scheduler a case run needs: its schedule and step i.
type stepper struct {
	timesteps, sigmas []float32
	step              func(i int, mo, x []float32) ([]float32, error)
}

func checkUniPC(c *caseData) ([]Result, error) {
	cfg, err := sched.ParseUniPCConfig(c.Args.Config)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCase, c.dir, err)
	}
	u, err := sched.NewUniPCShifted(cfg, c.Args.Steps, c.mu())
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCase, c.dir, err)
	}
	st := u.NewState()
	ts := u.Timesteps()
	return c.run(stepper{ts, u.Sigmas(), func(i int, mo, x []float32) ([]float32, error) {
		return u.Step(st, mo, ts[i], x)
	}})
}

func checkFlowMatch(c *caseData) ([]Result, error) {
	cfg, err := sched.ParseFlowMatchConfig(c.Args.Config)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCase, c.dir, err)
	}
	f, err := sched.NewFlowMatchEuler(cfg, c.Args.Steps, c.mu())
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCase, c.dir, err)
	}
	st := f.NewState()
	ts := f.Timesteps()
	return c.run(stepper{ts, f.Sigmas(), func(i int, mo, x []float32) ([]float32, error) {
		return f.Step(st, mo, ts[i], x)
	}})
}

// caseData is one case folder, read.
type caseData struct {
	dir  string
	Name string `json:"case"`
	Args struct {
		Config    json.RawMessage `json:"config"`
		Steps     int             `json:"num_inference_steps"`
		Mu        *float64        `json:"mu"`
		Scheduler string          `json:"scheduler"`
	} `json:"args"`
	inputs, outputs map[string]tensorData
}

type tensorData struct {
	shape []int
	data  []float32
}

func (c *caseData) mu() float64 {
	if c.Args.Mu == nil {
		return math.NaN()
	}
	return *c.Args.Mu
}

func (c *caseData) scheduler() string {
	switch {
	case c.Args.Scheduler != "":
		return c.Args.Scheduler
	case strings.HasPrefix(c.Name, "scheduler_unipc"):
		return "UniPCMultistepScheduler"
	case strings.HasPrefix(c.Name, "scheduler_flow_euler"):
		return "FlowMatchEulerDiscreteScheduler"
	}
	return ""
}

func readCase(dir string) (*caseData, error) {
	b, err := os.ReadFile(filepath.Join(dir, "case.json"))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCase, err)
	}
	c := &caseData{dir: dir}
	if err := json.Unmarshal(b, c); err != nil {
		return nil, fmt.Errorf("%w: %s/case.json: %w", ErrCase, dir, err)
	}
	if c.Args.Steps < 1 || len(c.Args.Config) == 0 {
		return nil, fmt.Errorf("%w: %s/case.json: args.num_inference_steps %d, args.config %q", ErrCase, dir, c.Args.Steps, c.Args.Config)
	}
	if c.inputs, err = readTensors(filepath.Join(dir, "inputs.safetensors")); err != nil {
		return nil, err
	}
	if c.outputs, err = readTensors(filepath.Join(dir, "outputs.safetensors")); err != nil {
		return nil, err
	}
	return c, nil
}

func readTensors(path string) (map[string]tensorData, error) {
	ts, err := paritycheck.ReadTensors(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCase, err)
	}
	out := make(map[string]tensorData, len(ts))
	for name, t := range ts {
		out[name] = tensorData{shape: t.Shape, data: t.Data}
	}
	return out, nil
}

// run steps through the schedule from the case's sample and compares every output.
func (c *caseData) run(s stepper) ([]Result, error) { return c.runWith(s, map[string][]float32{}) }

// runWith is run with outputs the stepper fills as it goes (got).
func (c *caseData) runWith(s stepper, got map[string][]float32) ([]Result, error) {
	sample, ok := c.inputs["sample"]
	if !ok {
		return nil, fmt.Errorf("%w: %s: inputs lack sample", ErrCase, c.dir)
	}
	got["timesteps"], got["sigmas"] = s.timesteps, s.sigmas
	x := sample.data
	var stepErr error
	for i := range s.timesteps {
		mo, ok := c.inputs[fmt.Sprintf("model_output_step%d", i)]
		if !ok {
			break // the outputs of the later steps are reported as not computed
		}
		next, err := s.step(i, mo.data, x)
		if err != nil {
			stepErr = err
			break
		}
		got[fmt.Sprintf("sample_step%d", i)] = next
		x = next
	}
	var out []Result
	for _, name := range sortedNames(c.outputs) {
		ref := c.outputs[name]
		res := Result{Case: c.Name, Tensor: name, Shape: ref.shape}
		lim := sampleLimit
		if name == "timesteps" || name == "sigmas" || name == "init_noise_sigma" {
			lim = scheduleLimit
		}
		res.Limit = lim.String()
		g, ok := got[name]
		switch {
		case !ok && stepErr != nil:
			res.Error = "not computed: " + stepErr.Error()
		case !ok:
			res.Error = "not computed"
		case len(g) != len(ref.data):
			res.Error = fmt.Sprintf("%d values, reference %d", len(g), len(ref.data))
		default:
			res.RelL2, res.MaxAbs, res.MaxULP = compare(g, ref.data)
			res.Pass = lim.Met(res.RelL2, res.MaxAbs, res.MaxULP)
		}
		out = append(out, res)
	}
	return out, nil
}

// compare returns ‖got−ref‖/‖ref‖ (NaN anywhere gives NaN; two zero vectors give 0), the
// largest |got−ref| and the largest distance in float32 ulps. Equal bits count as equal,
// and so does NaN against NaN.
func compare(got, ref []float32) (relL2, maxAbs float64, maxULP int64) {
	var num, den float64
	for i, r := range ref {
		g := got[i]
		if math.Float32bits(g) == math.Float32bits(r) {
			den += float64(r) * float64(r)
			continue
		}
		if g != g && r != r {
			continue // NaN where the reference has NaN (diffusers' degenerate last steps)
		}
		d := float64(g) - float64(r)
		if math.IsNaN(d) {
			return math.NaN(), math.NaN(), math.MaxInt64
		}
		num += d * d
		den += float64(r) * float64(r)
		maxAbs = max(maxAbs, math.Abs(d))
		maxULP = max(maxULP, paritycheck.ULPs(g, r))
	}
	switch {
	case num == 0:
		return 0, maxAbs, maxULP
	case den == 0:
		return math.Inf(1), maxAbs, maxULP
	}
	return math.Sqrt(num / den), maxAbs, maxULP
}

func sortedNames[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	// Natural order: sample_step10 after sample_step9.
	slices.SortFunc(names, func(a, b string) int {
		if len(a) != len(b) && strings.TrimRight(a, "0123456789") == strings.TrimRight(b, "0123456789") {
			return len(a) - len(b)
		}
		return strings.Compare(a, b)
	})
	return names
}
