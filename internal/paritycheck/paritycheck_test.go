package paritycheck

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/safetensors"
	"github.com/vdpp/vdpp/tensor"
)

func TestMaxULP(t *testing.T) {
	tests := []struct {
		a, b []float32
		want int64
	}{
		{[]float32{1}, []float32{1}, 0},
		{[]float32{1}, []float32{1.0000001}, 1},
		{[]float32{-0.0}, []float32{0}, 0},
		{[]float32{1e-45}, []float32{-1e-45}, 2},
	}
	for _, tc := range tests {
		if got := MaxULP(tc.a, tc.b); got != tc.want {
			t.Errorf("MaxULP(%v, %v) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestLimit(t *testing.T) {
	nan := float64(0)
	nan /= nan
	tests := []struct {
		l             Limit
		str           string
		relL2, maxAbs float64
		ulp           int64
		want          bool
	}{
		{Limit{RelL2: 1e-4}, "rel L2 <= 1e-04", 1e-4, 1, 9, true},
		{Limit{RelL2: 1e-4}, "rel L2 <= 1e-04", 2e-4, 0, 0, false},
		{Limit{RelL2: 1e-4}, "rel L2 <= 1e-04", nan, 0, 0, false},
		{Limit{RelL2: 1e-4, MaxAbs: 1e-4}, "rel L2 <= 1e-04, max <= 1e-04", 0, 2e-4, 0, false},
		{Limit{ULP: 1}, "<= 1 ulp", 1, 1, 1, true},
		{Limit{ULP: 1}, "<= 1 ulp", 0, 0, 2, false},
		{Limit{Exact: true}, "exact", 0, 0, 0, true},
	}
	for _, tc := range tests {
		if s := tc.l.String(); s != tc.str {
			t.Errorf("%+v.String() = %q, want %q", tc.l, s, tc.str)
		}
		if got := tc.l.Met(tc.relL2, tc.maxAbs, tc.ulp); got != tc.want {
			t.Errorf("%+v.Met(%g, %g, %d) = %v, want %v", tc.l, tc.relL2, tc.maxAbs, tc.ulp, got, tc.want)
		}
	}
}

func writeCase(t *testing.T, dir, name, caseJSON string) string {
	t.Helper()
	path := filepath.Join(dir, "cases", name)
	if err := os.MkdirAll(path, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(path, "case.json"), []byte(caseJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	x, _ := tensor.FromData([]float32{1, 2, 3, 4}, 2, 2)
	for _, f := range []string{"inputs.safetensors", "outputs.safetensors"} {
		if err := safetensors.WriteFile(filepath.Join(path, f), []safetensors.NamedTensor{{Name: "x", Tensor: x}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

func TestReadCase(t *testing.T) {
	dir := t.TempDir()
	writeCase(t, dir, "b_case", `{"args": {}}`)
	writeCase(t, dir, "a_case", `{"case": "vae_decode", "args": {"n": 3, "f": 0.5, "s": "x", "l": [1, 2], "half": 2.5}}`)
	cases, err := ListCases(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) != 2 || filepath.Base(cases[0]) != "a_case" || filepath.Base(cases[1]) != "b_case" {
		t.Fatalf("ListCases = %v", cases)
	}
	c, err := ReadCase(cases[0], true)
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "a_case" || c.Kind != "vae_decode" || c.Dir != cases[0] {
		t.Fatalf("case %q kind %q dir %q", c.Name, c.Kind, c.Dir)
	}
	if in, err := c.Input("x"); err != nil || !reflect.DeepEqual(in.Shape, []int{2, 2}) {
		t.Fatalf("Input(x) = %v, %v", in, err)
	}
	if _, err := c.Input("y"); err == nil || !strings.Contains(err.Error(), "a_case") {
		t.Fatalf("Input(y) error %v does not name the case", err)
	}
	if c.IntArg("n", 0) != 3 || c.IntArg("half", 7) != 7 || c.IntArg("none", 5) != 5 ||
		c.FloatArg("f", 0) != 0.5 || c.StringArg("s", "") != "x" ||
		!reflect.DeepEqual(c.IntListArg("l"), []int{1, 2}) || c.IntListArg("none") != nil {
		t.Fatalf("args read wrong: %v", c.Args)
	}
	c, err = ReadCase(cases[1], false)
	if err != nil {
		t.Fatal(err)
	}
	if c.Kind != "b_case" || c.Inputs != nil || len(c.Outputs) != 1 {
		t.Fatalf("case without kind or inputs: kind %q, %d inputs, %d outputs", c.Kind, len(c.Inputs), len(c.Outputs))
	}
}

func TestBadFolders(t *testing.T) {
	empty := t.TempDir()
	if _, err := ListCases(empty); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("no cases folder: %v", err)
	}
	os.Mkdir(filepath.Join(empty, "cases"), 0o755)
	if _, err := ListCases(empty); err == nil || !strings.Contains(err.Error(), "no cases") {
		t.Fatalf("empty cases folder: %v", err)
	}
	dir := t.TempDir()
	path := writeCase(t, dir, "bad", `{"args": `)
	if _, err := ReadCase(path, true); err == nil || !strings.Contains(err.Error(), "case.json") {
		t.Fatalf("corrupt case.json: %v", err)
	}
	path = writeCase(t, dir, "noinputs", `{}`)
	os.Remove(filepath.Join(path, "inputs.safetensors"))
	if _, err := ReadCase(path, true); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing inputs: %v", err)
	}
	if _, err := ReadCase(path, false); err != nil {
		t.Fatalf("inputs not asked for: %v", err)
	}
}
