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

// ErrFailed is returned by Report.Err when any comparison failed.
var ErrFailed = errors.New("parity: outputs outside tolerance")

// Default limits.
const (
	RelL2Limit  = 1e-4
	MaxAbsLimit = 1e-4
	ULPLimit    = 1
)

// Result is one compared tensor.
type Result struct {
	Case   string  `json:"case"`
	Tensor string  `json:"tensor"`
	Shape  []int   `json:"shape,omitempty"`
	RelL2  float64 `json:"rel_l2"`
	MaxAbs float64 `json:"max_abs"`
	MaxULP int64   `json:"max_ulp"`
	Limit  string  `json:"limit"`
	Pass   bool    `json:"pass"`
	Error  string  `json:"error,omitempty"`
}

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
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
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

// caseFiles is one case folder, read.
type caseFiles struct {
	name    string
	kind    string
	args    map[string]any
	inputs  map[string]*tensor.Dense
	outputs map[string]*tensor.Dense
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
			return nil, err
		}
		out[name] = t
	}
	return out, nil
}

// ListCases returns the case folders under dir/cases, sorted.
func ListCases(dir string) ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(dir, "cases"))
	if err != nil {
		return nil, fmt.Errorf("parity: %w", err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, filepath.Join(dir, "cases", e.Name()))
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		return nil, fmt.Errorf("parity: no cases under %s", filepath.Join(dir, "cases"))
	}
	return out, nil
}

func readCase(path string) (*caseFiles, error) {
	c := &caseFiles{name: filepath.Base(path), kind: filepath.Base(path)}
	b, err := os.ReadFile(filepath.Join(path, "case.json"))
	if err != nil {
		return nil, fmt.Errorf("parity: %w", err)
	}
	var meta struct {
		Case string         `json:"case"`
		Args map[string]any `json:"args"`
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		return nil, fmt.Errorf("parity: %s: %w", filepath.Join(path, "case.json"), err)
	}
	if meta.Case != "" {
		c.kind = meta.Case
	}
	c.args = meta.Args
	if c.inputs, err = readTensors(filepath.Join(path, "inputs.safetensors")); err != nil {
		return nil, fmt.Errorf("parity: %w", err)
	}
	if c.outputs, err = readTensors(filepath.Join(path, "outputs.safetensors")); err != nil {
		return nil, fmt.Errorf("parity: %w", err)
	}
	return c, nil
}

func (c *caseFiles) input(name string) (*tensor.Dense, error) {
	t, ok := c.inputs[name]
	if !ok {
		return nil, fmt.Errorf("case %s has no input %q", c.name, name)
	}
	return t, nil
}

func (c *caseFiles) intArg(name string, def int) int {
	if v, ok := c.args[name].(float64); ok {
		return int(v)
	}
	return def
}

func (c *caseFiles) floatArg(name string, def float64) float64 {
	if v, ok := c.args[name].(float64); ok {
		return v
	}
	return def
}

func (c *caseFiles) intListArg(name string) []int {
	raw, _ := c.args[name].([]any)
	var out []int
	for _, v := range raw {
		if f, ok := v.(float64); ok {
			out = append(out, int(f))
		}
	}
	return out
}

// compare checks got against ref under the limit for that tensor.
func compare(caseName, name string, got, ref *tensor.Dense, limit limit) Result {
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
	res.MaxULP = maxULP(got.Data, ref.Data)
	res.Pass = limit.ok(res)
	return res
}

type limit struct {
	relL2, maxAbs float64
	ulp           int64 // > 0: an ulp limit replaces the others
}

func (l limit) String() string {
	if l.ulp > 0 {
		return fmt.Sprintf("<= %d ulp", l.ulp)
	}
	s := fmt.Sprintf("rel L2 <= %.0e", l.relL2)
	if l.maxAbs > 0 {
		s += fmt.Sprintf(", max <= %.0e", l.maxAbs)
	}
	return s
}

func (l limit) ok(r Result) bool {
	if math.IsNaN(r.RelL2) || math.IsNaN(r.MaxAbs) {
		return false
	}
	if l.ulp > 0 {
		return r.MaxULP <= l.ulp
	}
	return r.RelL2 <= l.relL2 && (l.maxAbs == 0 || r.MaxAbs <= l.maxAbs)
}

var (
	relLimit   = limit{relL2: RelL2Limit}
	frameLimit = limit{relL2: RelL2Limit, maxAbs: MaxAbsLimit}
	ulpLimit   = limit{ulp: ULPLimit}
)

// maxULP is the largest distance in float32 units in the last place.
func maxULP(a, b []float32) int64 {
	var m int64
	for i := range a {
		d := ordered(a[i]) - ordered(b[i])
		if d < 0 {
			d = -d
		}
		m = max(m, d)
	}
	return m
}

func ordered(f float32) int64 {
	u := int64(math.Float32bits(f))
	if u&(1<<31) != 0 {
		return -(u & 0x7fffffff)
	}
	return u
}
