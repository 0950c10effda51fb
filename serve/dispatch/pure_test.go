package dispatch

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/internal/deptest"
)

// pureRule is what the dispatcher and the job rules (package serve/job) must not depend
// on: they decide; the driver (package serve) does their I/O and serve's workers run the
// networks. The engine's package pipeline reaches comm (and so net) for its transports;
// the pure packages use its types and never send.
func pureRule(pkg string) deptest.Rule {
	return deptest.Rule{
		Package: pkg,
		Deps: map[string]string{
			"github.com/gomlx/...":                 "GoMLX: networks run in serve's workers, never where jobs are decided",
			"github.com/vdpp/vdpp/model/nn/...":    "vdpp's network layers: the workers' (through the families)",
			"github.com/vdpp/vdpp/internal/sghook": "the CPU kernels: the workers'",
			"github.com/vdpp/vdpp/train/...":       "training is `vdpp train`'s",
			"github.com/vdpp/vdpp/model/svd/...":   "the dispatcher sees families only through model/family",
			"github.com/vdpp/vdpp/model/wan/...":   "the dispatcher sees families only through model/family",
			"go.etcd.io/bbolt":                     "the job store is the driver's (package serve)",
			"net/http/...":                         "HTTP is the driver's and the APIs'",
			"github.com/vdpp/vdpp/serve":           "the driver imports the dispatcher, not the reverse",
			"github.com/vdpp/vdpp/serve/wire":      "the worker protocol is the driver's",
			"github.com/vdpp/vdpp/serve/worker":    "the worker is a process of its own",
			"github.com/vdpp/vdpp/serve/httpapi":   "the HTTP API is the driver's",
		},
		Imports: map[string]string{
			"os/...":                    "files and processes are the driver's",
			"syscall":                   "files and processes are the driver's",
			"io/fs":                     "files are the driver's",
			"net/...":                   "sockets are the driver's",
			"database/sql":              "records are the store's",
			"github.com/vdpp/vdpp/comm": "batches go out as actions; the driver sends them",
		},
	}
}

// TestDeps: the dispatcher and the job rules depend on nothing that does I/O or runs a
// network, directly or through another package.
func TestDeps(t *testing.T) {
	for _, pkg := range []string{"github.com/vdpp/vdpp/serve/dispatch", "github.com/vdpp/vdpp/serve/job"} {
		deptest.Check(t, pureRule(pkg))
	}
}

// clockCalls read the clock or wait: the dispatcher gets the time with its events.
var clockCalls = []string{"Now", "Sleep", "After", "AfterFunc", "NewTimer", "NewTicker", "Tick", "Since", "Until"}

// TestPure: the dispatcher and the job rules start no goroutine and read no clock (TestDeps
// checks what they import); the compiler then keeps them pure.
func TestPure(t *testing.T) {
	for _, dir := range []string{".", "../job"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			n++
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.GoStmt:
					t.Errorf("%s starts a goroutine", path)
				case *ast.SelectorExpr:
					if x, ok := n.X.(*ast.Ident); ok && x.Name == "time" {
						for _, c := range clockCalls {
							if n.Sel.Name == c {
								t.Errorf("%s calls time.%s", path, c)
							}
						}
					}
				}
				return true
			})
		}
		if n == 0 {
			t.Fatalf("no sources in %s", dir)
		}
	}
}
