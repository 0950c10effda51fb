package serve

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/model/family"
)

// TestServeKnowsNoFamily: the server sees models only through the family seam. No file of
// serve/ (tests aside) imports a family's package or the registry of them, nor names a
// registered family in its code: what a job takes comes from the model's knob table and
// inputs, what it costs and runs from the seam's capabilities.
func TestServeKnowsNoFamily(t *testing.T) {
	names := family.FamilyNames()
	if len(names) == 0 {
		t.Fatal("no family registered: the test would check nothing")
	}
	forbidden := []string{"model/svd", "model/wan", "model/synthetic", "model/dummy", "model/families"}
	files := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		files++
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			for _, bad := range forbidden {
				if p == "github.com/vdpp/vdpp/"+bad || strings.HasPrefix(p, "github.com/vdpp/vdpp/"+bad+"/") {
					t.Errorf("serve/%s imports %s: a family's package", path, p)
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil && slices.Contains(names, s) {
					t.Errorf("serve/%s names the family %q in its code", path, s)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 20 {
		t.Fatalf("only %d files of serve/ read", files)
	}
}
