package goldentest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/vdpp/vdpp/internal/paritycheck"
	"github.com/vdpp/vdpp/safetensors"
)

// LinkComponents makes a temporary folder holding symlinks to the named entries of src
// (a model folder's components) and no cases, for a test to add its own.
func LinkComponents(t testing.TB, src string, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range names {
		if err := os.Symlink(filepath.Join(src, name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// CountOutputs returns how many output tensors the cases under dir/cases hold together.
func CountOutputs(t testing.TB, dir string) int {
	t.Helper()
	cases, err := paritycheck.ListCases(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range cases {
		f, err := safetensors.Open(filepath.Join(c, "outputs.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		n += len(f.Names())
		f.Close()
	}
	return n
}
