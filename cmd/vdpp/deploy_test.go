package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// deployDir holds the manifests users deploy vdpp with.
const deployDir = "../../deploy"

// invocation is one vdpp command line found in a manifest, and the variables the manifest
// sets for it.
type invocation struct {
	where string
	args  []string // after "vdpp"
	env   []string // variable names the manifest gives the process
}

// TestDeployManifests keeps deploy/ from rotting: every vdpp command line in it (container
// args of the Kubernetes manifests, the Slurm script's, and the command after `vdpp launch
// --`) is parsed by the real binary, so each flag must exist and take its value, and every
// variable a manifest sets for vdpp must be one vdpp's code reads.
func TestDeployManifests(t *testing.T) {
	var invs []invocation
	files, _ := filepath.Glob(filepath.Join(deployDir, "*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case strings.HasSuffix(f, ".yaml"):
			invs = append(invs, yamlInvocations(t, f, b)...)
		case strings.HasSuffix(f, ".sbatch"):
			invs = append(invs, scriptInvocations(t, f, b)...)
		}
	}
	// What deploy/ must cover: multi-node serve (LWS), a Slurm batch of bench and
	// generate, a Kubernetes Job.
	for _, want := range []string{"lws-serve.yaml: serve", "slurm-bench.sbatch: launch", "job-generate.yaml: generate"} {
		if !slices.ContainsFunc(invs, func(i invocation) bool { return i.where+": "+i.args[0] == want }) {
			t.Errorf("deploy/ has no %q", want)
		}
	}
	read := variablesRead(t)
	for _, inv := range invs {
		for _, cmd := range splitLaunch(inv.args) {
			checkFlags(t, inv.where, cmd)
		}
		for _, v := range inv.env {
			if !read[v] {
				t.Errorf("%s sets $%s, which vdpp never reads", inv.where, v)
			}
		}
	}
	if len(invs) < 4 {
		t.Fatalf("found only %d vdpp command lines in deploy/", len(invs))
	}
}

// splitLaunch returns the command lines in args: `launch FLAGS -- CMD ...` is two.
func splitLaunch(args []string) [][]string {
	if args[0] == "launch" {
		if i := slices.Index(args, "--"); i > 0 {
			return [][]string{args[:i], args[i+1:]}
		}
	}
	return [][]string{args}
}

// checkFlags reports what flagError finds in cmd.
func checkFlags(t *testing.T, where string, cmd []string) {
	t.Helper()
	if err := flagError(cmd); err != nil {
		t.Errorf("%s: %v", where, err)
	}
}

// flagError runs `vdpp CMD FLAGS... -h` (in this process): the flag package parses every
// flag before it reaches -h, so vdpp exits 0 only when each flag exists and its value
// parses.
// Values that are shell variables ("$SLURM_NNODES") are checked as "1".
func flagError(cmd []string) error {
	args := slices.Clone(cmd)
	for i, a := range args {
		if strings.Contains(a, "$") {
			args[i] = "1"
		}
	}
	var out bytes.Buffer
	if code := run(append(args, "-h"), &out, &out); code != 0 {
		return fmt.Errorf("vdpp %s: exit status %d: %s", strings.Join(cmd, " "), code, lastLine(out.Bytes()))
	}
	return nil
}

// The checks catch what they are for: a flag the binary lacks, a value it cannot parse, a
// variable it does not read.
func TestDeployChecksCatchRot(t *testing.T) {
	for _, tc := range []struct {
		cmd []string
		ok  bool
	}{
		{[]string{"serve", "--listen", "0.0.0.0:8080", "--model", "builtin"}, true},
		{[]string{"launch", "--nnodes", "$SLURM_NNODES"}, true},
		{[]string{"serve", "--no-such-flag", "x"}, false},
		{[]string{"bench", "--num-samples", "many"}, false},
		{[]string{"launch", "--nnodes", "2", "--master-port", "x"}, false},
	} {
		if err := flagError(tc.cmd); (err == nil) != tc.ok {
			t.Errorf("vdpp %v: %v, want ok %v", tc.cmd, err, tc.ok)
		}
	}
	if read := variablesRead(t); read["VDPP_NO_SUCH_VARIABLE"] || read["HOME"] {
		t.Error("variables vdpp does not read count as read")
	}
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[0]
}

// yamlInvocations finds every container that runs vdpp in a multi-document manifest.
func yamlInvocations(t *testing.T, path string, b []byte) []invocation {
	t.Helper()
	var out []invocation
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var doc any
		if err := dec.Decode(&doc); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		walkYAML(doc, func(m map[string]any) {
			args, ok := m["args"].([]any)
			if _, named := m["image"]; !ok || !named {
				return
			}
			inv := invocation{where: filepath.Base(path)}
			if cmd, ok := m["command"].([]any); ok && (len(cmd) != 1 || filepath.Base(cmd[0].(string)) != "vdpp") {
				return // another program
			}
			for _, a := range args {
				inv.args = append(inv.args, a.(string))
			}
			env, _ := m["env"].([]any)
			for _, e := range env {
				inv.env = append(inv.env, e.(map[string]any)["name"].(string))
			}
			out = append(out, inv)
		})
	}
	return out
}

func walkYAML(v any, f func(map[string]any)) {
	switch v := v.(type) {
	case map[string]any:
		f(v)
		for _, x := range v {
			walkYAML(x, f)
		}
	case []any:
		for _, x := range v {
			walkYAML(x, f)
		}
	}
}

// scriptInvocations finds the vdpp command lines of a shell script (also inside a
// quoted `bash -c '...'`) and the variables it exports.
func scriptInvocations(t *testing.T, path string, b []byte) []invocation {
	t.Helper()
	var exported []string
	var out []invocation
	for _, m := range regexp.MustCompile(`(?m)^\s*export\s+([A-Z_][A-Z0-9_]*)=`).FindAllStringSubmatch(string(b), -1) {
		exported = append(exported, m[1])
	}
	var scan func(words []string)
	scan = func(words []string) {
		for i, w := range words {
			if w == "vdpp" && i+1 < len(words) {
				out = append(out, invocation{where: filepath.Base(path), args: words[i+1:], env: exported})
				return
			}
			if strings.Contains(w, "vdpp ") {
				scan(shellWords(t, w))
			}
		}
	}
	for _, line := range strings.Split(string(b), "\n") {
		if s := strings.TrimSpace(line); s != "" && !strings.HasPrefix(s, "#") {
			scan(shellWords(t, line))
		}
	}
	return out
}

// shellWords splits a shell command line into words: quotes removed, variables left as
// written; enough for the scripts in deploy/.
func shellWords(t *testing.T, s string) []string {
	t.Helper()
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\'' || c == '"':
			j := strings.IndexByte(s[i+1:], c)
			if j < 0 {
				t.Fatalf("unclosed quote in %q", s)
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// variablesRead lists the environment variables vdpp's code reads: the string arguments of
// its Getenv, LookupEnv and launcher-variable calls, and its string constants named *Env.
func variablesRead(t *testing.T) map[string]bool {
	t.Helper()
	read := map[string]bool{}
	name := regexp.MustCompile(`^[A-Z][A-Z0-9_]+$`)
	fset := token.NewFileSet()
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && path != "../.." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		lit := func(e ast.Expr) string {
			if b, ok := e.(*ast.BasicLit); ok && b.Kind == token.STRING {
				if s, err := strconv.Unquote(b.Value); err == nil && name.MatchString(s) {
					return s
				}
			}
			return ""
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				fn := ""
				switch f := n.Fun.(type) {
				case *ast.Ident:
					fn = f.Name
				case *ast.SelectorExpr:
					fn = f.Sel.Name
				}
				if (fn == "Getenv" || fn == "LookupEnv" || fn == "get" || fn == "atoi" || fn == "getenv") && len(n.Args) > 0 {
					if s := lit(n.Args[0]); s != "" {
						read[s] = true
					}
				}
			case *ast.ValueSpec:
				for i, id := range n.Names {
					if strings.HasSuffix(id.Name, "Env") && i < len(n.Values) {
						if s := lit(n.Values[i]); s != "" {
							read[s] = true
						}
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LWS_LEADER_ADDRESS", "VDPP_SERVE_SECRET"} {
		if !read[v] {
			t.Fatalf("the scan of vdpp's code missed $%s, which it reads: the scan is broken", v)
		}
	}
	return read
}
