package clip

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

// testBackend is one simplego backend shared by the package's tests.
var testBackend = sync.OnceValues(func() (backends.Backend, error) { return nn.NewBackend("go") })

func backend(t testing.TB) backends.Backend {
	t.Helper()
	b, err := testBackend()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// goldenDir returns shared/golden/dev (skipping outside CI when absent).
func goldenDir(t testing.TB) string {
	t.Helper()
	return shared.Require(t, "golden", "dev")
}

// openGolden opens the dev checkpoint.
func openGolden(t testing.TB) *checkpoint.Checkpoint {
	t.Helper()
	ck, err := checkpoint.Open(goldenDir(t))
	if err != nil {
		t.Fatal(err)
	}
	return ck
}

// readTensors reads every tensor of a safetensors file as float32.
func readTensors(t testing.TB, path string) map[string]*tensor.Dense {
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

// goldenCase returns a case's inputs and outputs.
func goldenCase(t testing.TB, name string) (in, out map[string]*tensor.Dense) {
	t.Helper()
	dir := filepath.Join(goldenDir(t), "cases", name)
	return readTensors(t, filepath.Join(dir, "inputs.safetensors")), readTensors(t, filepath.Join(dir, "outputs.safetensors"))
}

// checkClose fails unless got matches ref in shape and within relative L2 tol; it logs the
// error either way.
func checkClose(t testing.TB, name string, got, ref *tensor.Dense, tol float64) {
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
