package deptest

import (
	"slices"
	"strings"
	"testing"
)

// graph is a small build: a -> b -> c -> gomlx/backends -> gomlx/internal, a -> os.
var graph = Graph{
	"a":                  {"b", "os"},
	"b":                  {"c"},
	"c":                  {"gomlx/backends"},
	"gomlx/backends":     {"gomlx/internal"},
	"gomlx/internal":     nil,
	"os":                 nil,
	"gomlxish/something": nil,
}

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, path string
		want          bool
	}{
		{"gomlx/...", "gomlx", true},
		{"gomlx/...", "gomlx/backends", true},
		{"gomlx/...", "gomlxish/something", false},
		{"os", "os", true},
		{"os", "os/exec", false},
		{"os/...", "os/exec", true},
	} {
		if got := Match(tc.pattern, tc.path); got != tc.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tc.pattern, tc.path, got, tc.want)
		}
	}
}

func TestViolations(t *testing.T) {
	r := Rule{Package: "a",
		Deps:    map[string]string{"gomlx/...": "no networks", "a": "itself is not a dependency"},
		Imports: map[string]string{"os": "no files"}}
	want := []string{
		"a depends on gomlx/backends and 1 more of gomlx/... (no networks): a -> b -> c -> gomlx/backends",
		"a imports os (no files)",
	}
	if got := r.Violations(graph); !slices.Equal(got, want) {
		t.Errorf("Violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// os arriving only transitively is no direct import.
	r = Rule{Package: "b", Deps: map[string]string{"gomlxish/...": "not reached"}, Imports: map[string]string{"os": "no files"}}
	if got := r.Violations(graph); len(got) != 0 {
		t.Errorf("Violations of b: %q, want none", got)
	}
}

// TestList: the go command's graph of this package holds its imports.
func TestList(t *testing.T) {
	const self = "github.com/vdpp/vdpp/internal/deptest"
	g, err := List(self)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(g[self], "os/exec") || g.Path(self, "os") == nil {
		t.Errorf("graph of %s: imports %q, path to os %q", self, g[self], g.Path(self, "os"))
	}
}
