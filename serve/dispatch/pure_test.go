package dispatch

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// ioImports are packages that do I/O or reach the outside world: the dispatcher and the
// job rules (package serve/job) must not import them; the driver (package serve) does
// their I/O.
var ioImports = []string{"net", "os", "os/exec", "syscall", "io/fs", "net/http", "database/sql",
	"go.etcd.io/bbolt", "github.com/vdpp/vdpp/comm", "github.com/vdpp/vdpp/serve",
	"github.com/vdpp/vdpp/serve/wire", "github.com/vdpp/vdpp/serve/worker"}

// clockCalls read the clock or wait: the dispatcher gets the time with its events.
var clockCalls = []string{"Now", "Sleep", "After", "AfterFunc", "NewTimer", "NewTicker", "Tick", "Since", "Until"}

// TestPure: the dispatcher and the job rules import nothing that does I/O, start no
// goroutine and read no clock; the compiler then keeps them pure.
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
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				for _, bad := range ioImports {
					if p == bad || strings.HasPrefix(p, bad+"/") && bad != "github.com/vdpp/vdpp/serve" {
						t.Errorf("%s imports %s", path, p)
					}
				}
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
