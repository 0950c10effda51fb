package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vdpp/vdpp/builtin"
	"github.com/vdpp/vdpp/internal/docexample"
	"github.com/vdpp/vdpp/internal/shared"
)

// The doc-example runner: every vdpp command of README.md and docs/*.md (the shell blocks'
// commands, internal/docexample) runs as written from a scratch copy of a fresh clone's
// layout, with the documented placeholders filled in (docs/commands.md, "Placeholders in the
// examples"):
//
//	in.png, my.png       files in the scratch folder: builtin/example.png
//	SVD_DIR, WAN_DIR     the built-in models' extracted folders (builtin, builtin-wan)
//	../shared/golden/... the reference data beside the checkout, when there is one
//
// Each example is first checked without running: its flags, with -h after them (an unknown
// flag, a value of the wrong type or a deprecated spelling fails it). Then, unless -short:
//
//   - a `template:` example is not run: one whose model is a Hugging Face id runs against an
//     empty cache and must stop with the one line saying the model is not cached;
//   - a `slow:` example runs only in the full tier (VDPP_DOCS_HEAVY=1, as CI sets it);
//   - `vdpp serve` starts on a free port, must come up (/readyz) and stop cleanly on SIGTERM;
//   - a transcript (`$ vdpp ...` and its output) must print what the document shows;
//   - any other example must exit 0 within its budget, printing no deprecation line;
//   - and no example may write into the checkout's folders (a user's clone would get the
//     files; out/ is for outputs).
//
// README.md's examples must need only the clone: none may use ../shared. A script an example
// block names (scripts/...) must exist.

// docBudget is how long one example may run (slowBudget: a `slow:` one), generous for the
// race detector on a loaded two-core machine.
const (
	docBudget  = 3 * time.Minute
	slowBudget = 10 * time.Minute
)

// docFiles are the documents whose examples run: README.md and docs/*.md (not the dated
// measurement pages, whose commands record what was run then).
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"../../README.md"}, files...)
}

// docScratch is a scratch layout of a fresh clone for one document's examples: root/repo
// (the working directory: the checkout's folders made again, each file a link to the
// checkout's, so an example naming a file of the checkout finds it; and in.png, my.png; what
// the examples write lands here) and root/shared (a link to the reference data, when there
// is some). Examples of one document share it, in order (one writes out/calib, the next
// reads it). A file an example writes into one of the checkout's folders (data/ is a Go
// package, not a place for a job database) would land in a user's clone: Written finds it.
type docScratch struct {
	repo      string
	env       []string
	sharedErr error
	fill      *strings.Replacer
	// mirrored are the folders made again from the checkout, relative to repo.
	mirrored map[string]bool
}

// mirror makes the checkout's folder src again at dst, linking each file (and each folder
// of downloaded packages, node_modules, whole), and records the folders it made.
func (s *docScratch) mirror(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if d.IsDir() && d.Name() != "node_modules" {
			if err := os.Mkdir(to, 0o755); err != nil {
				return err
			}
			r, err := filepath.Rel(s.repo, to)
			if err != nil {
				return err
			}
			s.mirrored[r] = true
			return nil
		}
		if err := os.Symlink(p, to); err != nil {
			return err
		}
		if d.IsDir() {
			return filepath.SkipDir
		}
		return nil
	})
}

// Written returns what examples wrote into the folders made from the checkout (files and
// folders that are not the checkout's), relative to repo, and removes them, so that the
// next example starts from the checkout again.
func (s *docScratch) Written() ([]string, error) {
	var out []string
	for dir := range s.mirrored {
		entries, err := os.ReadDir(filepath.Join(s.repo, dir))
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			rel := filepath.Join(dir, e.Name())
			if e.Type()&os.ModeSymlink != 0 || (e.IsDir() && s.mirrored[rel]) {
				continue
			}
			out = append(out, rel)
			if err := os.RemoveAll(filepath.Join(s.repo, rel)); err != nil {
				return nil, err
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

func newDocScratch(t *testing.T) *docScratch {
	t.Helper()
	root := t.TempDir()
	s := &docScratch{repo: filepath.Join(root, "repo"), mirrored: map[string]bool{}}
	img, err := os.ReadFile("../../builtin/example.png")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(s.repo, 0o755); err != nil {
		t.Fatal(err)
	}
	top, err := os.ReadDir("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range top {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") || e.Name() == "out" {
			continue
		}
		abs, err := filepath.Abs(filepath.Join("../..", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.mirror(abs, filepath.Join(s.repo, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"in.png", "my.png"} {
		p := filepath.Join(s.repo, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, img, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if dir, err := shared.Dir(); err == nil {
		abs, err := filepath.Abs(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(abs, filepath.Join(root, "shared")); err != nil {
			t.Fatal(err)
		}
	} else {
		s.sharedErr = err
	}
	svdDir, err := builtin.Resolve(builtin.Name)
	if err != nil {
		t.Fatal(err)
	}
	wanDir, err := builtin.Resolve(builtin.WanName)
	if err != nil {
		t.Fatal(err)
	}
	s.fill = strings.NewReplacer("SVD_DIR", svdDir, "WAN_DIR", wanDir)
	// Slurm's variables, which a template under srun reads (its flags are checked).
	s.env = append(os.Environ(), "HF_HOME="+filepath.Join(root, "hf"), "HF_HUB_CACHE=", "GOMLX_BACKEND=go", "GORACE=atexit_sleep_ms=0",
		"SLURM_NNODES=2", "SLURM_NODEID=0", "MASTER_ADDR=node0")
	return s
}

// hfModelArg finds a --model value that is a Hugging Face id (ORG/NAME, not a path).
var hfModelArg = regexp.MustCompile(`--model ([A-Za-z0-9][\w.-]*/[\w.-]+)(\s|$)`)

// hfModel returns the example's Hugging Face model id, or "".
func hfModel(ex docexample.Example) string {
	if m := hfModelArg.FindStringSubmatch(ex.Args); m != nil && !strings.HasPrefix(m[1], ".") {
		return m[1]
	}
	return ""
}

// subcommand is the first word of a command's arguments ("generate").
func subcommand(args string) string {
	if f := strings.Fields(args); len(f) > 0 {
		return f[0]
	}
	return ""
}

// docRunner runs examples with one binary.
type docRunner struct {
	bin   string
	heavy bool // run the `slow:` examples
	short bool // check flags only
}

// shell runs `prelude; [exec] BIN args` in s.repo and returns its output; a context ends it.
func (r docRunner) shell(ctx context.Context, s *docScratch, ex docexample.Example, args string) *exec.Cmd {
	var script strings.Builder
	for _, p := range ex.Prelude {
		script.WriteString(s.fill.Replace(p) + "; ")
	}
	for _, e := range ex.Env {
		script.WriteString("export " + e + "; ")
	}
	script.WriteString("exec '" + r.bin + "' " + s.fill.Replace(args))
	cmd := exec.CommandContext(ctx, "sh", "-c", script.String())
	cmd.Dir, cmd.Env = s.repo, s.env
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// flagCheck parses the example's flags without running it: the command with -h after its
// flags (for `launch ... -- CMD ...`, the launcher's and CMD's separately) must exit 0 with
// nothing on stderr (no unknown flag, no deprecated spelling).
func (r docRunner) flagCheck(s *docScratch, ex docexample.Example) error {
	parts := []string{ex.Args}
	if launch, inner, ok := strings.Cut(ex.Args, " -- "); ok && subcommand(ex.Args) == "launch" {
		parts = []string{launch, strings.TrimPrefix(strings.TrimSpace(inner), "vdpp ")}
	}
	for _, p := range parts {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := r.shell(ctx, s, ex, p+" -h")
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = io.Discard, &stderr
		err := cmd.Run()
		cancel()
		if err != nil || stderr.Len() > 0 {
			return fmt.Errorf("flags of `vdpp %s` (checked with -h): %v\n%s", p, err, stderr.String())
		}
	}
	return nil
}

// check runs one example as the package comment says; it returns why the example fails, or
// a reason to skip it (errSkip), or nil. An example that wrote into the checkout's folders
// fails, whatever else it did.
func (r docRunner) check(s *docScratch, readme bool, ex docexample.Example) error {
	err := r.run(s, readme, ex)
	written, werr := s.Written()
	switch {
	case werr != nil:
		return werr
	case len(written) > 0:
		return fmt.Errorf("wrote %s into the checkout's folders, where a user's clone would get them: write under out/ or a folder of its own", strings.Join(written, ", "))
	}
	return err
}

// run is check without the look at what the example wrote.
func (r docRunner) run(s *docScratch, readme bool, ex docexample.Example) error {
	if readme && strings.Contains(ex.Command()+strings.Join(ex.Prelude, " "), "../shared") {
		return errors.New("README.md's examples must need only the clone: this one uses ../shared")
	}
	if err := r.flagCheck(s, ex); err != nil {
		return err
	}
	if hf := hfModel(ex); hf != "" && ex.Template == "" {
		return fmt.Errorf("the model %s needs a download: mark the example `# template: ...`", hf)
	}
	if r.short {
		return skipf("-short checks the flags only")
	}
	if strings.HasPrefix(ex.Wrapper, "torchrun ") {
		if err := torchrunCheck(strings.TrimPrefix(ex.Wrapper, "torchrun ")); err != nil {
			return err
		}
	}
	if ex.Wrapper != "" || ex.Template != "" {
		if hf := hfModel(ex); hf != "" && ex.Wrapper == "" {
			return r.notCached(s, ex, hf)
		}
		return skipf("template: %s (flags checked)", ex.Template)
	}
	if ex.Slow != "" && !r.heavy {
		return skipf("slow: %s (VDPP_DOCS_HEAVY=1 runs it, as CI does)", ex.Slow)
	}
	if strings.Contains(ex.Command()+strings.Join(ex.Prelude, " "), "../shared") && s.sharedErr != nil {
		return errNeedsShared
	}
	if subcommand(ex.Args) == "serve" {
		return r.serve(s, ex)
	}
	budget := docBudget
	if ex.Slow != "" {
		budget = slowBudget
	}
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	cmd := r.shell(ctx, s, ex, ex.Args)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	if ctx.Err() != nil {
		return fmt.Errorf("over its budget of %v (mark it `# slow: ...` if it must take that long)\nstderr:\n%s", budget, lastLines(stderr.String(), 20))
	}
	if ex.Transcript {
		all := stdout.String() + stderr.String()
		for _, want := range ex.Output {
			if !strings.Contains(all, s.fill.Replace(want)) {
				return fmt.Errorf("the document shows the output line\n  %s\nwhich the command did not print; it printed:\n%s", want, all)
			}
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("%v after %v\nstdout:\n%s\nstderr:\n%s", err, time.Since(start).Round(time.Millisecond), lastLines(stdout.String(), 20), lastLines(stderr.String(), 30))
	}
	if strings.Contains(stderr.String(), "is deprecated") {
		return fmt.Errorf("prints a deprecation line for the document's spelling:\n%s", stderr.String())
	}
	return nil
}

// torchrunCheck parses torchrun's flags of a wrapped example with the torch beside Debian's
// Python (docs/training.md advises torch 1.13, whose flags take underscores only), when it
// is there; without torch it checks nothing.
func torchrunCheck(args string) error {
	const python = "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, append([]string{"-m", "torch.distributed.run"}, append(strings.Fields(args), "--help")...)...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	if err := cmd.Run(); err != nil {
		if strings.Contains(stderr.String(), "No module named") {
			return nil
		}
		return fmt.Errorf("torchrun's flags (%s -m torch.distributed.run ... --help): %v\n%s", python, err, lastLines(stderr.String(), 5))
	}
	return nil
}

// notCached runs an example whose model is a Hugging Face id against an empty cache: every
// flag is parsed and checked, and it must stop with exit status 2 and the one line saying
// the model is not cached.
func (r docRunner) notCached(s *docScratch, ex docexample.Example, hf string) error {
	ctx, cancel := context.WithTimeout(context.Background(), docBudget)
	defer cancel()
	cmd := r.shell(ctx, s, ex, ex.Args)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	cmd.Run()
	want := hf + " is not in the Hugging Face cache"
	if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(stderr.String(), want) || strings.Count(stderr.String(), "\n") != 1 {
		return fmt.Errorf("against an empty Hugging Face cache: exit %d, stderr:\n%s\nwant exit 2 and one line with %q", code, stderr.String(), want)
	}
	return nil
}

// serve starts a `vdpp serve` example on a free port, waits until it is ready (its workers
// loaded) and stops it with SIGTERM, which must end it with status 0.
func (r docRunner) serve(s *docScratch, ex docexample.Example) error {
	ctx, cancel := context.WithTimeout(context.Background(), docBudget)
	defer cancel()
	cmd := r.shell(ctx, s, ex, ex.Args+" --listen 127.0.0.1:0")
	var stderr syncBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- l
		io.Copy(io.Discard, stdout)
	}()
	go func() { done <- cmd.Wait() }()
	var url string
	select {
	case l := <-line:
		m := regexp.MustCompile(`^listening on (http://\S+)\n$`).FindStringSubmatch(l)
		if m == nil {
			cmd.Process.Kill()
			<-done
			return fmt.Errorf("no listening line (got %q)\nstderr:\n%s", l, lastLines(stderr.String(), 20))
		}
		url = m[1]
	case <-ctx.Done():
		<-done
		return fmt.Errorf("no listening line within %v\nstderr:\n%s", docBudget, lastLines(stderr.String(), 20))
	}
	for {
		if resp, err := http.Get(url + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-done:
			return fmt.Errorf("the server exited before it was ready: %v\nstderr:\n%s", err, lastLines(stderr.String(), 20))
		case <-ctx.Done():
			<-done
			return fmt.Errorf("not ready within %v\nstderr:\n%s", docBudget, lastLines(stderr.String(), 20))
		case <-time.After(50 * time.Millisecond):
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := <-done; err != nil {
		return fmt.Errorf("stopped with SIGTERM: %v\nstderr:\n%s", err, lastLines(stderr.String(), 20))
	}
	return nil
}

// errSkip marks a reason an example is not run here.
type errSkip struct{ why string }

func (e errSkip) Error() string { return e.why }

func skipf(format string, a ...any) error { return errSkip{fmt.Sprintf(format, a...)} }

// errNeedsShared: the example uses ../shared, which is not beside this checkout.
var errNeedsShared = errors.New("needs ../shared")

// TestDocExamples runs every example of README.md and docs/*.md (see the comment above).
//
// The documents run side by side, each in a scratch folder of its own (a document's
// examples in order), as many at once as -parallel allows, README.md first: it is the
// longest, and started last it would run alone at the end. The test itself is serial, so
// the documents do not share the machine with the other tests' processes.
func TestDocExamples(t *testing.T) {
	r := docRunner{bin: vdppPlain(t), heavy: os.Getenv("VDPP_DOCS_HEAVY") == "1", short: testing.Short()}
	workers := 1
	if f := flag.Lookup("test.parallel"); f != nil {
		if n, ok := f.Value.(flag.Getter).Get().(int); ok && n > 1 {
			workers = n
		}
	}
	docs := make(chan func())
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for run := range docs {
				run()
			}
		})
	}
	defer wg.Wait()
	defer close(docs)
	total := 0
	for _, file := range docFiles(t) {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		doc := docexample.Extract(string(data))
		name := strings.TrimPrefix(file, "../../")
		total += len(doc.Examples)
		// Subtests are named by the file's base name (-run TestDocExamples/caching.md).
		docs <- func() {
			t.Run(filepath.Base(name), func(t *testing.T) {
				for _, o := range doc.Others {
					if script := strings.Fields(o.Command)[0]; strings.HasPrefix(script, "scripts/") {
						if _, err := os.Stat(filepath.Join("../..", script)); err != nil {
							t.Errorf("%s:%d names %s, which does not exist", name, o.Line, script)
						}
					}
				}
				if len(doc.Examples) == 0 {
					return
				}
				s := newDocScratch(t)
				for _, ex := range doc.Examples {
					t.Run(fmt.Sprintf("%d", ex.Line), func(t *testing.T) {
						start := time.Now()
						err := r.check(s, name == "README.md", ex)
						var skip errSkip
						switch {
						case errors.As(err, &skip):
							t.Skipf("%s:%d: %s", name, ex.Line, skip.why)
						case errors.Is(err, errNeedsShared):
							shared.Require(t, "golden") // skips here, fails in CI
						case err != nil:
							t.Fatalf("%s:%d: %s\n%v", name, ex.Line, ex.Command(), err)
						}
						t.Logf("%s:%d: ok in %v: %s", name, ex.Line, time.Since(start).Round(time.Millisecond), ex.Command())
					})
				}
			})
		}
	}
	if total < 40 {
		t.Fatalf("only %d examples found in README.md and docs/", total)
	}
}

// The runner fails an example that is broken, each way a document can break: a flag the
// model refuses, a deprecated or mistyped spelling, a template whose flags are wrong, a
// transcript whose output differs, a download without the template marker, ../shared in the
// README, a command that fails, and one that writes into the checkout's folders.
func TestDocExampleRunnerCatchesBroken(t *testing.T) {
	t.Parallel()
	r := docRunner{bin: vdppPlain(t)}
	s := newDocScratch(t)
	md := "```sh\n" +
		"vdpp version\n" +
		"vdpp bench --model synthetic --guidance-scale 3 --steps 2 --num-samples 1 --step-ms 0\n" +
		"vdpp plan --model synthetic --total-steps 4 --devices 2 --step-ms 1 --measure=false\n" +
		"vdpp generate --model builtin --image in.png --stpes 3   # template: a typo in a template\n" +
		"vdpp generate --model Org/Big --image in.png\n" +
		"vdpp parity --golden ../shared/golden/dev\n" +
		"vdpp generate --model builtin --image missing.png --steps 1\n" +
		"vdpp bench --model synthetic --nproc 1 --steps 2 --num-samples 3 --step-ms 0 --json data/bench.json\n" +
		"```\n\n" +
		"    $ vdpp generate --model builtin --image in.png --guidance-scale 9\n" +
		"    vdpp generate: --guidance-scale is fine\n"
	doc := docexample.Extract(md)
	want := []string{
		"", // version runs
		"--guidance-scale applies to wan models",
		"--total-steps is deprecated",
		"unknown flag --stpes",
		"needs a download: mark the example",
		"must need only the clone",
		"missing.png",
		"wrote data/bench.json into the checkout's folders",
		"which the command did not print",
	}
	if len(doc.Examples) != len(want) {
		t.Fatalf("%d examples, want %d", len(doc.Examples), len(want))
	}
	for i, ex := range doc.Examples {
		err := r.check(s, true, ex)
		if want[i] == "" {
			if err != nil {
				t.Errorf("%s: %v, want it to pass", ex.Command(), err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want[i]) {
			t.Errorf("%s: %v; want a failure saying %q", ex.Command(), err, want[i])
		}
	}
}
