package paritycheck

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/vdpp/vdpp/safetensors"
	"github.com/vdpp/vdpp/tensor"
)

// Case is one case folder, read.
type Case struct {
	Dir     string
	Name    string // the folder name
	Kind    string // case.json's "case" (the folder name when absent)
	Args    map[string]any
	Inputs  map[string]*tensor.Dense
	Outputs map[string]*tensor.Dense
}

// ListCases returns the case folders under dir/cases, sorted.
func ListCases(dir string) ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(dir, "cases"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, filepath.Join(dir, "cases", e.Name()))
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		return nil, fmt.Errorf("no cases under %s", filepath.Join(dir, "cases"))
	}
	return out, nil
}

// ReadCase reads the case folder at path; its inputs only when readInputs is set (a case
// without a runner needs only its outputs' names).
func ReadCase(path string, readInputs bool) (*Case, error) {
	c := &Case{Dir: path, Name: filepath.Base(path), Kind: filepath.Base(path)}
	b, err := os.ReadFile(filepath.Join(path, "case.json"))
	if err != nil {
		return nil, err
	}
	var meta struct {
		Case string         `json:"case"`
		Args map[string]any `json:"args"`
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(path, "case.json"), err)
	}
	if meta.Case != "" {
		c.Kind = meta.Case
	}
	c.Args = meta.Args
	if readInputs {
		if c.Inputs, err = ReadTensors(filepath.Join(path, "inputs.safetensors")); err != nil {
			return nil, err
		}
	}
	if c.Outputs, err = ReadTensors(filepath.Join(path, "outputs.safetensors")); err != nil {
		return nil, err
	}
	return c, nil
}

// ReadTensors reads every tensor of a safetensors file.
func ReadTensors(path string) (map[string]*tensor.Dense, error) {
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

// FloatArg returns a numeric argument of case.json, or def.
func (c *Case) FloatArg(name string, def float64) float64 {
	if v, ok := c.Args[name].(float64); ok {
		return v
	}
	return def
}

// IntArg returns an integer argument of case.json, or def (also for a non-integral number).
func (c *Case) IntArg(name string, def int) int {
	if v, ok := c.Args[name].(float64); ok && v == float64(int(v)) {
		return int(v)
	}
	return def
}

// IntListArg returns the integers of a list argument of case.json (nil when absent).
func (c *Case) IntListArg(name string) []int {
	raw, _ := c.Args[name].([]any)
	var out []int
	for _, v := range raw {
		if f, ok := v.(float64); ok {
			out = append(out, int(f))
		}
	}
	return out
}
