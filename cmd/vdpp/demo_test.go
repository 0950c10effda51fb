package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The demo compares the pipeline with one process, then with one core per process, and
// says what each speedup means on the machine it runs on; the pipelined videos are the one-process
// run's, bit for bit.
func TestDemoSaysWhatItsSpeedupMeans(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("taskset"); err != nil {
		t.Skip("no taskset: the one-core-per-stage runs are skipped by the demo too")
	}
	if testing.Short() {
		t.Skip("runs the demo's pipelines and baselines")
	}
	// The binary without the race detector: the table is what is checked; the pipeline's
	// concurrent code runs under the detector in the generate and bench tests.
	code, stdout, stderr := runIn(t, vdppPlain(t), t.TempDir(), "demo", "--num-samples", "1", "--steps", "2")
	if code != 0 {
		t.Fatalf("demo: exit %d\n%s", code, stderr)
	}
	for _, want := range []string{
		"| 2-stage pipeline | 2 | all | 1 |", "| one process | 1 | all | 1 |",
		"| 2-stage pipeline, one core per stage | 2 | 1 | 1 |", "| one process on one core | 1 | 1 | 1 |",
		"What the speedup means here (", "With one core per stage, as each stage would have its own device, the 2-stage pipeline runs",
		"out/demo/pipeline-2/sample-000/video.gif",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("demo output lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Count(stdout, "| yes |") != 2 {
		t.Errorf("both pipelines should give the one-process bits:\n%s", stdout)
	}
}
