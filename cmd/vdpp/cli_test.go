package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vdpp/vdpp/internal/buildinfo"
	"github.com/vdpp/vdpp/internal/cli"
	"github.com/vdpp/vdpp/internal/wait"
)

// runHere runs vdpp in this process and returns its exit status, stdout and stderr.
func runHere(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// flagLine is a flag's entry in help: "  --name [TYPE]".
var flagLine = regexp.MustCompile(`(?m)^  --([a-z0-9-]+)(?: (\S+))?$`)

// Every command's help has a usage line and an example, lists its flags in groups, and a
// name means one thing: the same value type on every command, and a name two commands
// share is in the vocabulary (internal/cli) that groups it.
func TestHelpOfEveryCommand(t *testing.T) {
	typeOf := map[string]string{}
	users := map[string][]string{}
	for _, c := range commands() {
		if c.name == "worker" || c.name == "version" {
			continue
		}
		code, out, errOut := runHere(c.name, "-h")
		if code != 0 || errOut != "" {
			t.Errorf("vdpp %s -h: exit %d, stderr %q", c.name, code, errOut)
		}
		if !strings.HasPrefix(out, "usage: vdpp "+c.name) || !strings.Contains(out, "\nexample:\n  vdpp "+c.name) {
			t.Errorf("vdpp %s -h lacks a usage line or an example:\n%s", c.name, out)
		}
		for _, m := range flagLine.FindAllStringSubmatch(out, -1) {
			name, typ := m[1], m[2]
			// doctor --json prints JSON (a switch); everywhere else --json names a file.
			if c.name == "doctor" && name == "json" {
				continue
			}
			typ = valueKind(typ)
			if prev, ok := typeOf[name]; ok && prev != typ && typ != "" && prev != "" {
				t.Errorf("--%s is %q on %s but %q on %v", name, typ, c.name, prev, users[name])
			}
			if typ != "" {
				typeOf[name] = typ
			}
			users[name] = append(users[name], c.name)
		}
	}
	var shared []string
	for name, cmds := range users {
		if len(cmds) > 1 && !cli.Known(name) {
			shared = append(shared, name)
		}
	}
	sort.Strings(shared)
	if len(shared) > 0 {
		t.Errorf("flags shared by several commands but not in the vocabulary: %v", shared)
	}
	// generate's help groups its flags by topic.
	_, out, _ := runHere("generate", "-h")
	for _, g := range []string{"\ninput:\n  --image", "\nmodel:\n", "\nsampling:\n", "\nparallelism:\n", "\noutput:\n"} {
		if !strings.Contains(out, g) {
			t.Errorf("generate -h lacks group %q", g)
		}
	}
}

// valueKind is the kind of value a help entry's TYPE says ("" for a placeholder such as
// DIR, which says what and not which type; a bool has no TYPE and is "bool").
func valueKind(typ string) string {
	switch typ {
	case "":
		return "bool"
	case "int", "uint":
		return "integer"
	case "string", "float", "duration", "value":
		return typ
	}
	return ""
}

// Mistakes get one line, prefixed once by the command, with exit status 2.
func TestMistakesAreOneClearLine(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"generate", "--bogus"}, "vdpp generate: unknown flag --bogus"},
		{[]string{"generate", "--stpes", "3"}, "did you mean --steps?"},
		{[]string{"generate", "--model", "builtin", "--image", "x.png", "--nproc", "0"},
			"vdpp generate: --nproc 0: a run needs at least 1 process"},
		{[]string{"generate", "--model", "builtin", "--image", "x.png", "--height", "128"},
			"vdpp generate: --height without --width: give both (or neither, for the model's)"},
		{[]string{"bench", "--model", "synthetic", "--nproc", "3", "--steps", "2"}, "vdpp bench: --steps 2 < 3 pipeline stages"},
		{[]string{"nosuchcommand"}, `vdpp: unknown command "nosuchcommand" (vdpp help lists the commands)`},
		// A mistyped model name: the nearest built-in name, and no package prefix.
		{[]string{"generate", "--model", "buitlin", "--image", "x.png"}, `vdpp generate: unknown model "buitlin" (did you mean builtin?)`},
		{[]string{"generate", "--model", "builtin-wn", "--prompt", "a fox"}, `vdpp generate: unknown model "builtin-wn" (did you mean builtin-wan?)`},
		// A built-in model is named as given, not by its extracted folder.
		{[]string{"generate", "--model", "builtin", "--prompt", "a fox"}, "vdpp generate: --model builtin is an image-to-video model"},
	}
	for _, tc := range tests {
		code, out, errOut := runHere(tc.args...)
		line := strings.TrimSuffix(errOut, "\n")
		if code != 2 || out != "" || strings.Contains(line, "\n") || !strings.Contains(line, tc.want) {
			t.Errorf("vdpp %q: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", tc.args, code, out, errOut, tc.want)
		}
		if cmd := tc.args[0]; strings.Count(line, cmd+":") > 1 {
			t.Errorf("vdpp %q: the prefix is doubled: %q", tc.args, line)
		}
	}
}

// An old flag name still works and says what replaced it.
func TestDeprecatedNameSaysSo(t *testing.T) {
	code, _, errOut := runHere("bench", "--model", "synthetic", "--nproc", "3", "--total-steps", "2")
	if code != 2 || !strings.Contains(errOut, "vdpp bench: --total-steps is deprecated: use --steps\n") ||
		!strings.Contains(errOut, "--steps 2 < 3 pipeline stages") {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, out, _ := runHere(args...)
		if code != 0 || !strings.HasPrefix(out, "vdpp "+buildinfo.Version) || strings.Count(out, "\n") != 1 {
			t.Errorf("vdpp %v: exit %d, %q", args, code, out)
		}
	}
}

// Errors name a path once and carry no internal package names; a mistyped folder gets the
// folder beside it that it nearly names.
func TestErrorLinesClean(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "wan-model")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runHere("generate", "--model", empty, "--prompt", "a fox")
	want := empty + "/model_index.json"
	if code == 0 || strings.Count(errOut, want) != 1 || strings.Contains(errOut, "checkpoint:") || strings.Count(errOut, "\n") != 1 {
		t.Fatalf("exit %d, stderr %q; want one line naming %s once, without package names", code, errOut, want)
	}
	code, _, errOut = runHere("generate", "--model", filepath.Join(dir, "wan-modle"), "--prompt", "a fox")
	if code != 2 || !strings.Contains(errOut, "(did you mean "+empty+"?)") || strings.Contains(errOut, "family:") {
		t.Fatalf("exit %d, stderr %q; want exit 2 suggesting %s", code, errOut, empty)
	}
}

// Ctrl-C says "interrupted", once: one process exits with status 130 and that word; a
// launched job's ranks stop without a line each, and the launcher prints one.
func TestInterruptedIsOneLine(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts processes")
	}
	for _, c := range []struct {
		name  string
		args  []string
		ready string // printed once the job runs
		want  string // the last line
	}{
		{"one process", []string{"generate", "--model", "builtin-wan", "--prompt", "a fox", "--steps", "1000", "--out", filepath.Join(t.TempDir(), "out")}, "writing to", "vdpp generate: interrupted"},
		{"local workers", []string{"bench", "--model", "synthetic", "--step-ms", "50", "--steps", "50", "--num-samples", "100", "--nproc", "2"}, "msg=mesh", "vdpp bench: interrupted: stopped ranks 0-1"},
		{"launched", []string{"launch", "--nproc-per-node", "2", "--", "bench", "--model", "synthetic", "--step-ms", "50", "--steps", "50", "--num-samples", "100"}, "[rank 0] time=", "vdpp launch: interrupted: stopped ranks 0-1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(vdpp(t), c.args...)
			var stderr syncBuffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if !wait.For(time.Minute, func() bool { return strings.Contains(stderr.String(), c.ready) }) {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("never ready:\n%s", stderr.String())
			}
			before := strings.Count(stderr.String(), "\n")
			cmd.Process.Signal(os.Interrupt)
			cmd.Wait()
			out := stderr.String()
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			// A signal that comes before the launcher listens for it cancels the command's
			// context, which says "interrupted" alone.
			if code := cmd.ProcessState.ExitCode(); code != 130 || !strings.HasPrefix(c.want, lines[len(lines)-1]) || !strings.HasPrefix(lines[len(lines)-1], "vdpp "+c.args[0]+": interrupted") || strings.Contains(out, "context canceled") {
				t.Fatalf("exit %d, stderr:\n%s\nwant exit 130, last line %q, no \"context canceled\"", code, out, c.want)
			}
			// After the signal: the summary, and at most the progress and INFO logs of what
			// was already under way; no warning or error of a rank.
			for _, l := range lines[before : len(lines)-1] {
				if !strings.Contains(l, "level=INFO") && !strings.HasPrefix(l, "generate: ") {
					t.Fatalf("a line after the interrupt besides the summary: %q\n%s", l, out)
				}
			}
		})
	}
}
