package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// vdppIn runs the binary in dir and returns its exit status, stdout and stderr.
func vdppIn(t *testing.T, dir string, args ...string) (int, string, string) {
	t.Helper()
	return runIn(t, vdpp(t), dir, args...)
}

// runIn runs the binary bin in dir and returns its exit code, stdout and stderr.
func runIn(t *testing.T, bin, dir string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, stdout.String(), stderr.String()
}

// A reused --out never mixes two runs: refused with one line unless --overwrite, which
// leaves only the new run's samples; without --out each run gets the next out/run-NNN. Not
// on a terminal, progress is a plain line counting steps, with the rate and the ETA.
func TestGenerateOutNeverMixesRuns(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	img := testImage(t)
	tiny := []string{"generate", "--model", "builtin", "--image", img, "--steps", "2", "--num-frames", "2"}
	code, stdout, stderr := vdppIn(t, dir, append(tiny, "--num-samples", "2", "--out", "gen")...)
	if code != 0 || stdout != "gen/sample-000\ngen/sample-001\n" {
		t.Fatalf("first run: exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"generate: writing to gen\n", "generate: 4/4 steps, 2/2 samples", "steps/s", "ETA"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	code, stdout, stderr = vdppIn(t, dir, append(tiny, "--out", "gen")...)
	if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "vdpp generate: --out gen is not empty") {
		t.Fatalf("second run into gen: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, stdout, stderr = vdppIn(t, dir, append(tiny, "--out", "gen", "--overwrite", "--quiet")...)
	if code != 0 || stdout != "gen/sample-000\n" || stderr != "" {
		t.Fatalf("--overwrite --quiet: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "gen", "sample-001")); !os.IsNotExist(err) {
		t.Fatalf("the earlier run's sample-001 is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "gen", "generate.log")); err != nil {
		t.Fatalf("--quiet wrote no log: %v", err)
	}
	for _, want := range []string{"out/run-001/sample-000\n", "out/run-002/sample-000\n"} {
		if code, stdout, stderr := vdppIn(t, dir, append(tiny, "--quiet")...); code != 0 || stdout != want {
			t.Fatalf("without --out: exit %d, stdout %q (want %q), stderr %q", code, stdout, want, stderr)
		}
	}
}

// generate takes bench's mesh flags: pp x dp, cfg and cp meshes give the one-process frames
// bit for bit; report.json records the mesh.
func TestGenerateMeshes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	img := testImage(t)
	tiny := []string{"generate", "--model", "builtin", "--image", img, "--steps", "2", "--num-frames", "2", "--num-samples", "2", "--quiet"}
	run := func(out string, mesh ...string) {
		t.Helper()
		if code, stdout, stderr := vdppIn(t, dir, append(append(tiny, "--out", out), mesh...)...); code != 0 {
			logs, _ := os.ReadFile(filepath.Join(dir, out, "generate.log"))
			t.Fatalf("%v: exit %d\n%s%s\nlogs:\n%s", mesh, code, stdout, stderr, logs)
		}
	}
	run("one")
	for name, mesh := range map[string][]string{"pp2dp2": {"--pp", "2", "--dp", "2"}, "cfg2": {"--cfg", "2"}, "cp2": {"--cp", "2", "--nproc", "2"}} {
		run(name, mesh...)
		for _, s := range []string{"sample-000", "sample-001"} {
			requireSameFrames(t, filepath.Join(dir, "one"), filepath.Join(dir, name), s, 2, name)
			rep, err := os.ReadFile(filepath.Join(dir, name, s, "report.json"))
			if err != nil {
				t.Fatal(err)
			}
			var r struct{ NProc, PP, CFG, CP, DP int }
			if err := json.Unmarshal(rep, &r); err != nil {
				t.Fatal(err)
			}
			if r.NProc != 4 && name == "pp2dp2" || r.PP*r.CFG*r.CP*r.DP != r.NProc || r.NProc < 2 {
				t.Errorf("%s %s: report mesh %+v", name, s, r)
			}
		}
	}
	// The mesh's mistakes are one line each.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--cfg", "2", "--max-guidance", "1", "--min-guidance", "1"}, "--cfg 2 runs the two halves of classifier-free guidance on two ranks, but this run is not guided"},
		{[]string{"--nproc", "3", "--pp", "2"}, "--nproc 3 but --pp 2 x --cfg 1 x --cp 1 x --dp 1 = 2 processes"},
		{[]string{"--cp", "3"}, "the mesh runs --cp 3, but --num-frames 2 gives a latent of 2 frames: every cp rank needs one"},
		{[]string{"--plan", "auto", "--pp", "2"}, "--plan auto chooses --pp/--cfg/--cp/--dp itself"},
	} {
		code, _, stderr := vdppIn(t, dir, append(append(tiny, "--out", "bad"), tc.args...)...)
		if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want one line with %q", tc.args, code, stderr, tc.want)
		}
	}
}
