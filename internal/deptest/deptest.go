// Package deptest checks a package's place in vdpp's layering from its tests: what it must
// not depend on, transitively (anything in `go list -deps`) or directly (its own imports),
// each with the reason stated beside it. It is in the spirit of tailscale's tstest/deptest.
//
// A rule names packages by import path; a path ending in "/..." names that package and
// every package under it ("github.com/gomlx/gomlx/..."). A failure names the forbidden
// package, the reason, and one import chain from the checked package to it, so the edge to
// cut is in the message.
//
// Contract: Check runs the go command (`go list`) of the toolchain on PATH, in the test's
// working directory, for the host's GOOS/GOARCH and default build tags; it only reads.
package deptest

import (
	"bytes"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"testing"
)

// Rule is what one package must not depend on.
type Rule struct {
	// Package is the import path checked ("github.com/vdpp/vdpp/serve/dispatch").
	Package string
	// Deps are forbidden anywhere in Package's import graph (its non-test build), by import
	// path or "path/..." pattern, each mapped to the reason.
	Deps map[string]string
	// Imports are forbidden as direct imports of Package's own non-test files, for packages
	// that arrive transitively anyway (os comes with fmt) but that this package must not
	// use itself.
	Imports map[string]string
}

// Graph is a build's import graph: each package's direct imports.
type Graph map[string][]string

// List loads the import graph of pkgs (`go list -deps`).
func List(pkgs ...string) (Graph, error) {
	args := append([]string{"list", "-deps", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}"}, pkgs...)
	cmd := exec.Command("go", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	g := Graph{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 {
			g[f[0]] = f[1:]
		}
	}
	return g, nil
}

// Match reports whether the import path p is named by pattern (a path, or "path/..." for
// the path and everything under it).
func Match(pattern, p string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return p == base || strings.HasPrefix(p, base+"/")
	}
	return p == pattern
}

// Path returns a shortest import chain from root to dep in g (root first), or nil when
// root does not depend on dep.
func (g Graph) Path(root, dep string) []string {
	prev := map[string]string{root: ""}
	queue := []string{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p == dep {
			var chain []string
			for ; p != ""; p = prev[p] {
				chain = append(chain, p)
			}
			for i, j := 0, len(chain)-1; i < j; i, j = i+1, j-1 {
				chain[i], chain[j] = chain[j], chain[i]
			}
			return chain
		}
		for _, q := range g[p] {
			if _, seen := prev[q]; !seen {
				prev[q] = p
				queue = append(queue, q)
			}
		}
	}
	return nil
}

// Deps returns root and every package it depends on in g, sorted.
func (g Graph) Deps(root string) []string {
	seen := map[string]bool{root: true}
	queue := []string{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, q := range g[p] {
			if !seen[q] {
				seen[q] = true
				queue = append(queue, q)
			}
		}
	}
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// Violations returns one line per pattern of r that g breaks, sorted; none when r holds.
// A broken Deps pattern is reported once, through the matching package nearest to
// r.Package, with the count of the others it matches.
func (r Rule) Violations(g Graph) []string {
	deps := g.Deps(r.Package)
	var out []string
	for pattern, why := range r.Deps {
		var best []string
		n := 0
		for _, dep := range deps {
			if dep == r.Package || !Match(pattern, dep) {
				continue
			}
			n++
			if chain := g.Path(r.Package, dep); best == nil || len(chain) < len(best) {
				best = chain
			}
		}
		if n == 0 {
			continue
		}
		more := ""
		if n > 1 {
			more = fmt.Sprintf(" and %d more of %s", n-1, pattern)
		}
		out = append(out, fmt.Sprintf("%s depends on %s%s (%s): %s", r.Package, best[len(best)-1], more, why, strings.Join(best, " -> ")))
	}
	for _, imp := range g[r.Package] {
		for pattern, why := range r.Imports {
			if Match(pattern, imp) {
				out = append(out, fmt.Sprintf("%s imports %s (%s)", r.Package, imp, why))
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// Check fails t for each dependency of r.Package that r forbids.
func Check(t testing.TB, r Rule) {
	t.Helper()
	g, err := List(r.Package)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := g[r.Package]; !ok {
		t.Fatalf("go list -deps %s: the package is not in its own graph", r.Package)
	}
	for _, v := range r.Violations(g) {
		t.Error(v)
	}
}
