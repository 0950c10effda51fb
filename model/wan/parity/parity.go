// Package parity checks vdpp's Wan implementation against reference outputs: for every case
// under DIR/cases (case.json, inputs.safetensors, outputs.safetensors) of a diffusers Wan
// folder it runs the Go code on the stored inputs and compares every stored output tensor.
//
// Contract: every tensor in a case's outputs is reported. A case kind with a runner is
// compared under the limits of shared/golden/wan-dev/README.md (relative L2 <= 1e-4);
// a case kind without one yet (VAE, schedulers, the full pipeline until their runners
// land) is reported "not yet checked" for each of its tensors and makes Report.Err fail
// with ErrUnchecked: it is never counted as passed. Runners register per case kind
// (register, from the file that implements them); sizes come from the configs and the
// case's own tensors and arguments, never from the dev shapes.
package parity

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/vdpp/vdpp/safetensors"
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
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
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
type Case struct {
	Dir     string
	Name    string // the folder name
	Kind    string // case.json's "case" (the folder name when absent)
	Args    map[string]any
	Inputs  map[string]*tensor.Dense
	Outputs map[string]*tensor.Dense
}

// Input returns a named input tensor or an error naming the case.
func (c *Case) Input(name string) (*tensor.Dense, error) {
	t, ok := c.Inputs[name]
	if !ok {
		return nil, fmt.Errorf("case %s has no input %q", c.Name, name)
	}
	return t, nil
}

// StringArg returns a string argument of case.json, or def.
func (c *Case) StringArg(name, def string) string {
	if v, ok := c.Args[name].(string); ok {
		return v
	}
	return def
}

func readTensors(path string) (map[string]*tensor.Dense, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]*tensor.Dense{}
	for _, name := range f.Names() {
		t, err := f.Tensor(name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out[name] = t
	}
	return out, nil
}

// ListCases returns the case folders under dir/cases, sorted.
func ListCases(dir string) ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(dir, "cases"))
	if err != nil {
		return nil, fmt.Errorf("wan parity: %w", err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, filepath.Join(dir, "cases", e.Name()))
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		return nil, fmt.Errorf("wan parity: no cases under %s", filepath.Join(dir, "cases"))
	}
	return out, nil
}

// ReadCase reads a case folder; inputs are read only when the case has a runner (read
// says so), outputs always (their names are reported either way).
func ReadCase(path string, readInputs bool) (*Case, error) {
	c := &Case{Dir: path, Name: filepath.Base(path), Kind: filepath.Base(path)}
	b, err := os.ReadFile(filepath.Join(path, "case.json"))
	if err != nil {
		return nil, fmt.Errorf("wan parity: %w", err)
	}
	var meta struct {
		Case string         `json:"case"`
		Args map[string]any `json:"args"`
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		return nil, fmt.Errorf("wan parity: %s: %w", filepath.Join(path, "case.json"), err)
	}
	if meta.Case != "" {
		c.Kind = meta.Case
	}
	c.Args = meta.Args
	if readInputs {
		if c.Inputs, err = readTensors(filepath.Join(path, "inputs.safetensors")); err != nil {
			return nil, fmt.Errorf("wan parity: %w", err)
		}
	}
	if c.Outputs, err = readTensors(filepath.Join(path, "outputs.safetensors")); err != nil {
		return nil, fmt.Errorf("wan parity: %w", err)
	}
	return c, nil
}

// compare checks got against ref under the relative L2 limit.
func compare(caseName, name string, got, ref *tensor.Dense) Result {
	res := Result{Case: caseName, Tensor: name, Shape: ref.Shape, Limit: fmt.Sprintf("rel L2 <= %.0e", RelL2Limit), Status: StatusFail}
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
	if !math.IsNaN(res.RelL2) && res.RelL2 <= RelL2Limit {
		res.Status, res.Pass = StatusOK, true
	}
	return res
}
