// Package shared locates the project's reference material (the ../shared folder beside the
// repository: svd/ spec and vectors, golden/ checkpoints and cases) for tests and tools.
//
// Contract: Dir returns $VDPP_SHARED when set, otherwise the first "shared" folder holding a
// golden/ directory found beside the current directory or any parent. Tests that need it call
// Require, which skips outside CI and fails in CI (CI=true) when the folder is missing, so a
// missing reference can never turn a CI run green silently.
package shared

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// ErrNotFound is returned when no shared folder can be found.
var ErrNotFound = errors.New("shared: reference folder not found (set VDPP_SHARED)")

// Dir returns the shared folder.
func Dir() (string, error) {
	if d := os.Getenv("VDPP_SHARED"); d != "" {
		if _, err := os.Stat(d); err != nil {
			return "", err
		}
		return d, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		cand := filepath.Join(d, "shared")
		if st, err := os.Stat(filepath.Join(cand, "golden")); err == nil && st.IsDir() {
			return cand, nil
		}
		if filepath.Dir(d) == d {
			return "", ErrNotFound
		}
	}
}

// Path joins elem to the shared folder.
func Path(elem ...string) (string, error) {
	d, err := Dir()
	if err != nil {
		return "", err
	}
	return filepath.Join(append([]string{d}, elem...)...), nil
}

// Require returns Path(elem...) for a test, skipping it when the folder is absent outside CI
// and failing it in CI.
func Require(t testing.TB, elem ...string) string {
	t.Helper()
	p, err := Path(elem...)
	if err == nil {
		if _, err = os.Stat(p); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("reference data missing in CI: %v", err)
	}
	t.Skipf("reference data missing: %v", err)
	return ""
}
