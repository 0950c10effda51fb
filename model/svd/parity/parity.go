// Package parity checks vdpp's SVD implementation against reference outputs: for every case
// under DIR/cases (inputs.safetensors, outputs.safetensors, case.json) it runs the Go code on
// the stored inputs and compares every stored output tensor.
//
// Contract: every tensor in a case's outputs is compared; an output the runner cannot compute
// is a failure, never a skip. Limits follow shared/golden/README.md: relative L2 <= 1e-4
// (frames of the full pipeline also max |diff| <= 1e-4), sigmas and timesteps within 1 ulp.
// Nothing about a case's sizes is assumed: they come from the checkpoint's configs and the
// case's own tensors and arguments.
package parity

import (
	"errors"
	"fmt"
	"strings"

	"github.com/vdpp/vdpp/internal/paritycheck"
	"github.com/vdpp/vdpp/tensor"
)

// ErrFailed is returned by Report.Err when any comparison failed.
var ErrFailed = errors.New("parity: outputs outside tolerance")

// Default limits.
const (
	RelL2Limit  = 1e-4
	MaxAbsLimit = 1e-4
	ULPLimit    = 1
)

// Result is one compared tensor.
type Result = paritycheck.Result

// Report is the outcome of a parity run.
type Report struct {
	Dir     string   `json:"dir"`
	Backend string   `json:"backend"`
	Pass    bool     `json:"pass"`
	Results []Result `json:"results"`
}

// Err returns nil when every result passed, else an error counting the failures.
func (r Report) Err() error {
	n := 0
	for _, res := range r.Results {
		if !res.Pass {
			n++
		}
	}
	if n == 0 && len(r.Results) > 0 {
		return nil
	}
	if len(r.Results) == 0 {
		return fmt.Errorf("%w: no tensors compared in %s", ErrFailed, r.Dir)
	}
	return fmt.Errorf("%w: %d of %d tensors", ErrFailed, n, len(r.Results))
}

// WriteJSON writes the report to path.
func (r Report) WriteJSON(path string) error {
	return paritycheck.WriteJSON(path, r)
}

// Table renders the results as aligned text, one line per tensor.
func (r Report) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-20s %-24s %12s %12s %8s  %-26s %s\n", "case", "tensor", "rel L2", "max |diff|", "max ulp", "limit", "result")
	for _, res := range r.Results {
		verdict := "ok"
		if !res.Pass {
			verdict = "FAIL"
			if res.Error != "" {
				verdict += ": " + res.Error
			}
		}
		fmt.Fprintf(&b, "%-20s %-24s %12.3e %12.3e %8d  %-26s %s\n", res.Case, res.Tensor, res.RelL2, res.MaxAbs, res.MaxULP, res.Limit, verdict)
	}
	return b.String()
}

// ListCases returns the case folders under dir/cases, sorted.
func ListCases(dir string) ([]string, error) {
	cases, err := paritycheck.ListCases(dir)
	if err != nil {
		return nil, fmt.Errorf("parity: %w", err)
	}
	return cases, nil
}

func readCase(path string) (*paritycheck.Case, error) {
	c, err := paritycheck.ReadCase(path, true)
	if err != nil {
		return nil, fmt.Errorf("parity: %w", err)
	}
	return c, nil
}

// compare checks got against ref under the limit for that tensor.
func compare(caseName, name string, got, ref *tensor.Dense, limit paritycheck.Limit) Result {
	res := Result{Case: caseName, Tensor: name, Shape: ref.Shape, Limit: limit.String()}
	if got == nil {
		res.Error = "not computed"
		return res
	}
	if got.Len() != ref.Len() {
		res.Error = fmt.Sprintf("shape %v, reference %v", got.Shape, ref.Shape)
		return res
	}
	res.RelL2 = tensor.RelL2(got, ref)
	res.MaxAbs = tensor.MaxAbsDiff(got, ref)
	res.MaxULP = paritycheck.MaxULP(got.Data, ref.Data)
	res.Pass = limit.Met(res.RelL2, res.MaxAbs, res.MaxULP)
	if limit.Exact {
		res.Pass = tensor.BitEqual(got, ref)
	}
	return res
}

var (
	relLimit   = paritycheck.Limit{RelL2: RelL2Limit}
	frameLimit = paritycheck.Limit{RelL2: RelL2Limit, MaxAbs: MaxAbsLimit}
	ulpLimit   = paritycheck.Limit{ULP: ULPLimit}
	exactLimit = paritycheck.Limit{Exact: true}
)
