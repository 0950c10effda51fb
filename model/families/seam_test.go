package families_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/internal/deptest"
	"github.com/vdpp/vdpp/model/family"
)

const module = "github.com/vdpp/vdpp/"

// familyPackages are the packages of the shipped families: what families.go imports
// besides the seam itself, the model interface and the built-in model's files.
func familyPackages(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "families.go", nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		switch strings.TrimPrefix(p, module) {
		case "model", "model/family", "builtin":
			continue
		}
		if strings.HasPrefix(p, module+"model/") {
			out = append(out, p)
		}
	}
	if len(out) < 3 {
		t.Fatalf("found only %v among families.go's imports", out)
	}
	return out
}

// sourceFiles walks the repository's non-test Go files, calling visit with each file's path
// relative to the repository root (slash-separated) and its syntax.
func sourceFiles(t *testing.T, visit func(rel string, f *ast.File)) {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		visit(filepath.ToSlash(rel), f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// under reports whether rel lies in one of the folders dirs.
func under(rel string, dirs ...string) bool {
	for _, d := range dirs {
		if strings.HasPrefix(rel, d+"/") {
			return true
		}
	}
	return false
}

// TestNoFamilyImports: the engine (generate, serve, bench, plan, pipeline, ...) sees models
// only through the family seam. Only model/ (the families themselves), the commands
// (cmd/, scripts/) and train/ (which trains the built-in SVD model) import a family's
// packages. Tests may pick a concrete family as a fixture.
func TestNoFamilyImports(t *testing.T) {
	fams := familyPackages(t)
	sourceFiles(t, func(rel string, f *ast.File) {
		if under(rel, "model", "cmd", "scripts", "train") {
			return
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			for _, fam := range fams {
				if p == fam || strings.HasPrefix(p, fam+"/") {
					t.Errorf("%s imports %s: ask the family seam (model/family) instead", rel, p)
				}
			}
		}
	})
}

// TestNoFamilyNameSwitch: code outside model/ and the commands asks the family for
// capabilities (family.Description, optional Sampler interfaces) rather than comparing its
// name: no ==, != or switch case against a registered family name or alias.
func TestNoFamilyNameSwitch(t *testing.T) {
	names := family.Names()
	isName := func(e ast.Expr) (string, bool) {
		lit, ok := e.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return "", false
		}
		v, err := strconv.Unquote(lit.Value)
		return v, err == nil && slices.Contains(names, v)
	}
	sourceFiles(t, func(rel string, f *ast.File) {
		if under(rel, "model", "cmd", "scripts") {
			return
		}
		var found []string
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BinaryExpr:
				if n.Op != token.EQL && n.Op != token.NEQ {
					return true
				}
				for _, e := range []ast.Expr{n.X, n.Y} {
					if v, ok := isName(e); ok {
						found = append(found, v)
					}
				}
			case *ast.CaseClause:
				for _, e := range n.List {
					if v, ok := isName(e); ok {
						found = append(found, v)
					}
				}
			}
			return true
		})
		if len(found) > 0 {
			t.Errorf("%s compares a family's name (%v): ask the family for the capability instead", rel, found)
		}
	})
}

// TestFamiliesApart: what is one family's stays under model/<family>. No package of one
// family depends (transitively, in its non-test build) on another family's packages, and
// the shared packages under model/ (the contract, the seam, model/nn, model/clip, ...)
// depend on none: code two families use lives outside both, as the CLIP encoder of SVD and
// Wan image-to-video does in model/clip. Only this package, which registers them all, sees
// every family.
func TestFamiliesApart(t *testing.T) {
	fams := familyPackages(t)
	g, err := deptest.List(module + "model/...")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, p := range slices.Sorted(maps.Keys(g)) {
		if !strings.HasPrefix(p, module+"model/") || deptest.Match(module+"model/families/...", p) {
			continue
		}
		r := deptest.Rule{Package: p, Deps: map[string]string{}}
		for _, fam := range fams {
			if !deptest.Match(fam+"/...", p) {
				r.Deps[fam+"/..."] = "a family's code stays under its own folder: what two families share moves out of both (as model/clip)"
			}
		}
		for _, v := range r.Violations(g) {
			t.Error(v)
		}
		checked++
	}
	if checked < 10 {
		t.Fatalf("checked only %d packages under model/", checked)
	}
}
