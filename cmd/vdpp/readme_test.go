package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/internal/shared"
)

// readmeExamples are the command lines of README.md's shell blocks that run vdpp
// (`go run ./cmd/vdpp ...`, comments cut), after the first block (the demo, which CI runs
// as its main command, and the test command).
func readmeExamples(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	block, in := 0, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "```") {
			if in = !in; in {
				block++
			}
			continue
		}
		if !in || block == 1 || !strings.HasPrefix(line, "go run ./cmd/vdpp ") {
			continue
		}
		if i := strings.Index(line, " # "); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		out = append(out, line)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// heavyExamples are the README examples that take more than about ten seconds on two
// cores; they run when VDPP_README_HEAVY=1 (CI sets it), so that the test stays short on a
// developer's machine.
var heavyExamples = []string{"bench --model synthetic --step-ms 20 ", "parity --golden "}

// hfModel finds a --model value that is a Hugging Face id (ORG/NAME, not a path).
var hfModel = regexp.MustCompile(`--model ([A-Za-z0-9][\w.-]*/[\w.-]+)(\s|$)`)

// Every README example runs as written, in a scratch copy of the layout it assumes (the
// repository's builtin/example.png, ../shared with the golden data, out/ for outputs): it
// exits 0. An example whose model comes from the Hugging Face cache is checked up to the
// model, against an empty cache: every flag is parsed and checked, and it stops with the
// one line saying the model is not cached. The heavy examples run only when CI asks
// (VDPP_README_HEAVY=1).
func TestREADMEExamples(t *testing.T) {
	examples := readmeExamples(t)
	if len(examples) < 10 {
		t.Fatalf("only %d examples found in README.md", len(examples))
	}
	root := t.TempDir()
	repo := filepath.Join(root, "repo")
	if err := os.MkdirAll(filepath.Join(repo, "builtin"), 0o755); err != nil {
		t.Fatal(err)
	}
	img, err := os.ReadFile("../../builtin/example.png")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "builtin", "example.png"), img, 0o644); err != nil {
		t.Fatal(err)
	}
	sharedDir, sharedErr := shared.Dir()
	if sharedErr == nil {
		if abs, err := filepath.Abs(sharedDir); err == nil {
			sharedDir = abs
		}
		if err := os.Symlink(sharedDir, filepath.Join(root, "shared")); err != nil {
			t.Fatal(err)
		}
	}
	env := append(os.Environ(), "HF_HOME="+filepath.Join(root, "hf"), "HF_HUB_CACHE=", "GOMLX_BACKEND=go", "GORACE=atexit_sleep_ms=0")
	for _, ex := range examples {
		name := strings.Join(strings.Fields(ex)[3:min(len(strings.Fields(ex)), 7)], " ")
		t.Run(name, func(t *testing.T) {
			for _, h := range heavyExamples {
				if strings.Contains(ex, h) && os.Getenv("VDPP_README_HEAVY") != "1" {
					t.Skipf("heavy (VDPP_README_HEAVY=1 runs it, as CI does): %s", ex)
				}
			}
			if strings.Contains(ex, "../shared") && sharedErr != nil {
				shared.Require(t, "golden") // skips here, fails in CI
			}
			cmd := exec.Command("sh", "-c", strings.Replace(ex, "go run ./cmd/vdpp", "'"+vdpp(t)+"'", 1))
			cmd.Dir, cmd.Env = repo, env
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			if m := hfModel.FindStringSubmatch(ex); m != nil && !strings.HasPrefix(m[1], ".") {
				want := "vdpp generate: --model " + m[1] + " is not in the Hugging Face cache"
				if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.HasPrefix(stderr.String(), want) || strings.Count(stderr.String(), "\n") != 1 {
					t.Fatalf("%s\nexit %d, stderr:\n%s\nwant exit 2 and one line %q...", ex, code, stderr.String(), want)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\n%v\nstdout:\n%s\nstderr:\n%s", ex, err, stdout.String(), stderr.String())
			}
		})
	}
}
