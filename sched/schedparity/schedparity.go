// Package schedparity checks the flow-matching schedulers of package sched (UniPC and
// flow-match Euler) against reference cases executed with diffusers: a case folder holds
// case.json (args.config: the scheduler_config.json keys, args.num_inference_steps,
// optional args.mu), inputs.safetensors (sample, model_output_step{i}) and
// outputs.safetensors (timesteps, sigmas, sample_step{i} = the sample after step i, each
// step fed the previous step's output).
//
// Contract: every tensor in a case's outputs is compared, and an output the runner does not
// know is a failure, never a skip. timesteps and sigmas must agree within ScheduleULPLimit
// ulp (the Go schedule is meant to be exact; MaxULP shows it), samples within relative L2
// RelL2Limit. Reading the case is the only I/O; errors are returned for unreadable or
// malformed cases, results for everything that could be compared.
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
	RelL2Limit       = 1e-4
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
	return strings.HasPrefix(name, "scheduler_unipc") || strings.HasPrefix(name, "scheduler_flow_euler")
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
	}
	return nil, fmt.Errorf("%w: %s: not a scheduler case", ErrCase, dir)
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

// stepper is the part of both schedulers a case run needs.
type stepper struct {
	timesteps, sigmas []float32
	step              func(mo []float32, t float32, x []float32) ([]float32, error)
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
	return c.run(stepper{u.Timesteps(), u.Sigmas(), func(mo []float32, t float32, x []float32) ([]float32, error) {
		return u.Step(st, mo, t, x)
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
	return c.run(stepper{f.Timesteps(), f.Sigmas(), func(mo []float32, t float32, x []float32) ([]float32, error) {
		return f.Step(st, mo, t, x)
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
func (c *caseData) run(s stepper) ([]Result, error) {
	sample, ok := c.inputs["sample"]
	if !ok {
		return nil, fmt.Errorf("%w: %s: inputs lack sample", ErrCase, c.dir)
	}
	got := map[string][]float32{"timesteps": s.timesteps, "sigmas": s.sigmas}
	x := sample.data
	var stepErr error
	for i, t := range s.timesteps {
		mo, ok := c.inputs[fmt.Sprintf("model_output_step%d", i)]
		if !ok {
			break // the outputs of the later steps are reported as not computed
		}
		next, err := s.step(mo.data, t, x)
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
		if name == "timesteps" || name == "sigmas" {
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
