// Package parity checks vdpp's Wan implementation against reference outputs: for every case
// under DIR/cases (case.json, inputs.safetensors, outputs.safetensors) of a diffusers Wan
// folder it runs the Go code on the stored inputs and compares every stored output tensor.
// The runners cover shared/golden/wan-dev's cases: transformer_forward,
// transformer_2_forward, transformer_forward_i2v (model/wan/transformer), vae_encode,
// vae_decode (model/wan/vae), scheduler_unipc, scheduler_flow_euler (sched/schedparity)
// and full_pipeline_moe (WanPipeline with both experts and guidance, run through the Wan
// family's Sampler and the engine's Stepper, as generate runs it), and shared/golden/
// wan-dev-cache's full_pipeline_fbcache (the same pipeline with diffusers' First Block
// Cache on both experts: every call's decision exact, the compared values, predictions,
// latents and frames within the limits, and the uncached run).
//
// Contract: every tensor in a case's outputs is reported. Limits follow
// shared/golden/wan-dev/README.md: relative L2 <= 1e-4, the pipeline's frames also
// max |diff| <= 1e-4, its timesteps, sigmas and experts exact, the scheduler cases'
// schedules within 1 ulp. A case kind without a runner is reported "not yet checked" for
// each of its tensors and makes Report.Err fail with ErrUnchecked: it is never counted as
// passed. Runners register per case kind from the file that implements them; sizes come
// from the configs and the case's own tensors and arguments, never from the dev shapes.
package parity

import (
	"errors"
	"fmt"
	"strings"

	"github.com/vdpp/vdpp/internal/paritycheck"
	"github.com/vdpp/vdpp/tensor"
)

// Sentinel errors of Report.Err.
var (
	// ErrFailed: a compared tensor is outside its limit or could not be computed.
	ErrFailed = errors.New("wan parity: outputs outside tolerance")
	// ErrUnchecked: some cases have no runner yet, so their tensors were not compared.
	ErrUnchecked = errors.New("wan parity: cases not yet checked")
)

// RelL2Limit is the relative L2 limit of every compared tensor.
const RelL2Limit = 1e-4

// Status of one tensor.
const (
	StatusOK        = "ok"
	StatusFail      = "FAIL"
	StatusUnchecked = "not yet checked"
)

// Result is one output tensor of one case.
type Result struct {
	Case   string  `json:"case"`
	Tensor string  `json:"tensor"`
	Shape  []int   `json:"shape,omitempty"`
	RelL2  float64 `json:"rel_l2"`
	MaxAbs float64 `json:"max_abs"`
	MaxULP int64   `json:"max_ulp,omitempty"` // schedule tensors, compared in ulp
	Limit  string  `json:"limit"`
	Status string  `json:"status"`
	Pass   bool    `json:"pass"`
	Error  string  `json:"error,omitempty"`
}

// Report is the outcome of a parity run.
type Report struct {
	Dir     string   `json:"dir"`
	Family  string   `json:"family"`
	Backend string   `json:"backend"`
	Pass    bool     `json:"pass"`
	Results []Result `json:"results"`
}

// Err returns nil when every tensor was compared and passed; otherwise an error matching
// ErrFailed (some compared tensor failed) and/or ErrUnchecked (some case has no runner),
// counting both.
func (r Report) Err() error {
	failed, unchecked := 0, 0
	var cases []string
	for _, res := range r.Results {
		switch res.Status {
		case StatusOK:
		case StatusUnchecked:
			unchecked++
			if len(cases) == 0 || cases[len(cases)-1] != res.Case {
				cases = append(cases, res.Case)
			}
		default:
			failed++
		}
	}
	var errs []error
	if len(r.Results) == 0 {
		errs = append(errs, fmt.Errorf("%w: no tensors in %s", ErrFailed, r.Dir))
	}
	if failed > 0 {
		errs = append(errs, fmt.Errorf("%w: %d of %d tensors", ErrFailed, failed, len(r.Results)))
	}
	if unchecked > 0 {
		errs = append(errs, fmt.Errorf("%w: %d tensors of %s", ErrUnchecked, unchecked, strings.Join(cases, ", ")))
	}
	return errors.Join(errs...)
}

// Checked returns how many tensors were compared (passed or failed).
func (r Report) Checked() int {
	n := 0
	for _, res := range r.Results {
		if res.Status != StatusUnchecked {
			n++
		}
	}
	return n
}

// WriteJSON writes the report to path.
func (r Report) WriteJSON(path string) error {
	return paritycheck.WriteJSON(path, r)
}

// Table renders the results as aligned text, one line per compared tensor and one per
// case whose tensors were not checked.
func (r Report) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-24s %-26s %12s %12s  %-16s %s\n", "case", "tensor", "rel L2", "max |diff|", "limit", "result")
	for i := 0; i < len(r.Results); i++ {
		res := r.Results[i]
		verdict := res.Status
		if res.Error != "" {
			verdict += ": " + res.Error
		}
		if res.Status == StatusUnchecked { // one line for the case's run of unchecked tensors
			j := i
			for j+1 < len(r.Results) && r.Results[j+1].Case == res.Case && r.Results[j+1].Status == StatusUnchecked {
				j++
			}
			what := res.Tensor
			if j > i {
				what = fmt.Sprintf("(%d tensors)", j-i+1)
			}
			fmt.Fprintf(&b, "%-24s %-26s %12s %12s  %-16s %s\n", res.Case, what, "-", "-", res.Limit, verdict)
			i = j
			continue
		}
		fmt.Fprintf(&b, "%-24s %-26s %12.3e %12.3e  %-16s %s\n", res.Case, res.Tensor, res.RelL2, res.MaxAbs, res.Limit, verdict)
	}
	return b.String()
}

// Case is one case folder, read.
type Case = paritycheck.Case

// ListCases returns the case folders under dir/cases, sorted.
func ListCases(dir string) ([]string, error) {
	cases, err := paritycheck.ListCases(dir)
	if err != nil {
		return nil, fmt.Errorf("wan parity: %w", err)
	}
	return cases, nil
}

// ReadCase reads a case folder; inputs are read only when the case has a runner (read
// says so), outputs always (their names are reported either way).
func ReadCase(path string, readInputs bool) (*Case, error) {
	c, err := paritycheck.ReadCase(path, readInputs)
	if err != nil {
		return nil, fmt.Errorf("wan parity: %w", err)
	}
	return c, nil
}

// limit is what a tensor must meet: relative L2, optionally max |diff|, or Exact.
type limit = paritycheck.Limit

var relLimit = limit{RelL2: RelL2Limit}

// compare checks got against ref under lim.
func compare(caseName, name string, got, ref *tensor.Dense, lim limit) Result {
	res := Result{Case: caseName, Tensor: name, Shape: ref.Shape, Limit: lim.String(), Status: StatusFail}
	switch {
	case got == nil:
		res.Error = "not computed"
		return res
	case !tensor.SameShape(got, ref):
		res.Error = fmt.Sprintf("shape %v, reference %v", got.Shape, ref.Shape)
		return res
	}
	res.RelL2 = tensor.RelL2(got, ref)
	res.MaxAbs = tensor.MaxAbsDiff(got, ref)
	ok := lim.Met(res.RelL2, res.MaxAbs, 0)
	if lim.Exact {
		ok = tensor.BitEqual(got, ref)
	}
	if ok {
		res.Status, res.Pass = StatusOK, true
	}
	return res
}
