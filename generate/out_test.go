package generate

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vdpp/vdpp/internal/progress"
	"github.com/vdpp/vdpp/internal/wait"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/pipeline"
)

func mkdirs(t *testing.T, root string, names ...string) {
	t.Helper()
	for _, n := range names {
		p := filepath.Join(root, n)
		if strings.HasSuffix(n, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Without --out every run gets the next numbered folder; --out must be empty or new
// unless --overwrite, which removes the earlier run's samples and log and nothing else.
func TestPrepareOut(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, want := range []string{"out/run-001", "out/run-002"} {
		o, msg, err := PrepareOut(Options{})
		if err != nil || o.Out != want || !strings.Contains(msg, "writing to "+want+" (a fresh run folder") {
			t.Fatalf("fresh: %q, %q, %v; want %s", o.Out, msg, err, want)
		}
	}
	mkdirs(t, "out", "run-007/", "notes/")
	if o, _, _ := PrepareOut(Options{}); o.Out != "out/run-008" {
		t.Fatalf("after run-007: %s", o.Out)
	}

	if o, msg, err := PrepareOut(Options{Out: "new/dir"}); err != nil || msg != "generate: writing to new/dir" {
		t.Fatalf("new folder: %+v %q %v", o, msg, err)
	}
	if _, err := os.Stat("new/dir"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := PrepareOut(Options{Out: "new/dir"}); err != nil {
		t.Fatalf("empty folder refused: %v", err)
	}

	mkdirs(t, "old", "sample-000/", "sample-001/", "sample-012/", "generate.log", "notes.txt", "sample-x/")
	_, _, err := PrepareOut(Options{Out: "old"})
	if !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), "--out old is not empty") || !strings.Contains(err.Error(), "--overwrite") {
		t.Fatalf("earlier run: %v", err)
	}
	if _, err := os.Stat("old/sample-001"); err != nil {
		t.Fatalf("a refused run removed files: %v", err)
	}
	_, msg, err := PrepareOut(Options{Out: "old", Overwrite: true})
	if err != nil || !strings.Contains(msg, "removed 3 sample folders") {
		t.Fatalf("overwrite: %q %v", msg, err)
	}
	ents, _ := os.ReadDir("old")
	var left []string
	for _, e := range ents {
		left = append(left, e.Name())
	}
	if strings.Join(left, " ") != "notes.txt sample-x" {
		t.Fatalf("after --overwrite: %v, want notes.txt sample-x", left)
	}
}

// The display reads the ranks' reports: plain lines when not a terminal, a bar redrawn in
// place on one, nothing with --quiet; every mode ends with the final state.
func TestDisplay(t *testing.T) {
	dir := t.TempDir()
	p0 := newRankProgress(dir, 0, 0, true)
	p1 := newRankProgress(dir, 1, 1, true)
	p0.event(pipelineCompute(0, 0, 2))
	p0.event(pipelineCompute(1, 0, 2))
	p1.event(pipelineCompute(0, 2, 4))
	p1.phase(progress.Decoding, 0)
	// The second step came within writeEvery of the first: it is written a little later.
	if !wait.For(10*time.Second, func() bool {
		var steps int64
		for _, r := range readRanks(dir) {
			steps += r.Steps
		}
		return steps == 6
	}) {
		t.Fatalf("reports %+v: want 6 steps", readRanks(dir))
	}
	o := Options{NumSamples: 2, Params: family.Params{Steps: 4}, Progress: "auto"}
	run := func(o Options, terminal bool) string {
		var out strings.Builder
		r := &Runner{Progress: &out, Terminal: terminal, PlainEvery: time.Hour}
		done := make(chan struct{})
		close(done)
		r.display(o, dir, done)
		return out.String()
	}
	plain := run(o, false)
	if want := "generate: 6/8 steps, 0/2 samples"; !strings.HasPrefix(plain, want) || !strings.Contains(plain, "rank 0: sample 1 steps 0-2, rank 1: decoding sample 0\n") {
		t.Fatalf("plain:\n%q\nwant %q ... rank 0: sample 1 steps 0-2, rank 1: decoding sample 0", plain, want)
	}
	if bar := run(o, true); !strings.HasPrefix(bar, "\r[===============     ] 6/8 steps") || !strings.HasSuffix(bar, "\x1b[K\n") {
		t.Fatalf("bar: %q", bar)
	}
	o.Quiet = true
	if quiet := run(o, false); quiet != "" {
		t.Fatalf("quiet: %q", quiet)
	}
}

// pipelineCompute is the event of a denoising call on sample s, steps [step0, step1).
func pipelineCompute(s int64, step0, step1 int) pipeline.Event {
	return pipeline.Event{Kind: "compute", Samples: []int64{s}, Step0: step0, Step1: step1}
}
