// Package goldentest holds the helpers the model packages' tests share for the golden
// reference data (shared/golden/dev, wan-dev): one pure-Go backend per test binary, the
// checkpoint, a case's tensors, a relative-L2 comparison that logs the error it finds, and
// for the parity tests a folder of linked components and the count of the cases' outputs.
//
// Contract: every helper fails the test (or skips it outside CI when the reference folder
// is absent, see internal/shared.Require); none returns an error to check.
package goldentest

import (
	"path/filepath"
	"sync"
	"testing"

	"github.com/gomlx/gomlx/backends"

	"github.com/vdpp/vdpp/internal/shared"
	"github.com/vdpp/vdpp/model/checkpoint"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/safetensors"
	"github.com/vdpp/vdpp/tensor"
)

var testBackend = sync.OnceValues(func() (backends.Backend, error) { return nn.NewBackend("go") })

// Backend returns the simplego backend shared by a test binary.
func Backend(t testing.TB) backends.Backend {
	t.Helper()
	b, err := testBackend()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Dir returns shared/golden/dev.
func Dir(t testing.TB) string {
	t.Helper()
	return shared.Require(t, "golden", "dev")
}

// Checkpoint opens the dev checkpoint.
func Checkpoint(t testing.TB) *checkpoint.Checkpoint {
	t.Helper()
	ck, err := checkpoint.Open(Dir(t))
	if err != nil {
		t.Fatal(err)
	}
	return ck
}

// ReadTensors reads every tensor of a safetensors file as float32.
func ReadTensors(t testing.TB, path string) map[string]*tensor.Dense {
	t.Helper()
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]*tensor.Dense{}
	for _, n := range f.Names() {
		d, err := f.Tensor(n)
		if err != nil {
			t.Fatal(err)
		}
		out[n] = d
	}
	return out
}

// Case returns a golden case's inputs and outputs.
func Case(t testing.TB, name string) (in, out map[string]*tensor.Dense) {
	t.Helper()
	dir := filepath.Join(Dir(t), "cases", name)
	return ReadTensors(t, filepath.Join(dir, "inputs.safetensors")), ReadTensors(t, filepath.Join(dir, "outputs.safetensors"))
}

// CheckClose fails unless got matches ref in shape and within relative L2 tol; it logs the
// error either way.
func CheckClose(t testing.TB, name string, got, ref *tensor.Dense, tol float64) {
	t.Helper()
	if got == nil || !tensor.SameShape(got, ref) {
		t.Fatalf("%s: shape %v, want %v", name, got, ref.Shape)
	}
	rel := tensor.RelL2(got, ref)
	t.Logf("%s: rel L2 %.3g, max abs %.3g", name, rel, tensor.MaxAbsDiff(got, ref))
	if !(rel <= tol) {
		t.Errorf("%s: rel L2 %.3g > %.g", name, rel, tol)
	}
}
