package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Every value generate can check without running is checked before the first step, as one
// line naming the flag, and a refused run writes nothing (no run folder, no --out).
func TestGenerateValidationBeforeWork(t *testing.T) {
	t.Parallel()
	img := testImage(t)
	common := []string{"generate", "--model", "builtin", "--image", img, "--height", "32", "--width", "32", "--steps", "1"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--fps", "-5"}, `invalid value "-5" for flag --fps: -5 must be in [1, 240]`},
		{[]string{"--num-frames", "-1"}, `invalid value "-1" for flag --num-frames: -1 must be in [1, 1048576]`},
		{[]string{"--steps", "0"}, `flag --steps: 0 must be in [1, 10000]`},
		{[]string{"--cache-threshold", "0.1"}, "--cache-threshold applies to --cache fbcache only, and no cache is set"},
		{[]string{"--cache", "deepcache", "--cache-threshold", "0.1"}, "--cache-threshold applies to --cache fbcache, not deepcache"},
		{[]string{"--cache", "deepcache", "--cache-interval", "16777217"}, "--cache-interval: 16777217 must be in [2, 10000]"},
		{[]string{"--guidance-scale", "3"}, "--guidance-scale applies to wan models"},
		{[]string{"--seed", "-2"}, "flag --seed: -2 must be >= -1"},
		{[]string{"--min-guidance", "5", "--max-guidance", "3"}, "--min-guidance 5 is above --max-guidance 3"},
		{[]string{"--width", "33", "--height", "32"}, "--width 33 and --height 32 must be positive multiples of 8"},
	} {
		dir := t.TempDir()
		out := filepath.Join(dir, "out")
		cmd := exec.Command(vdpp(t), append(append(common, "--out", out), c.args...)...)
		cmd.Dir = dir
		b, err := cmd.CombinedOutput()
		msg := strings.TrimSpace(string(b))
		if err == nil || cmd.ProcessState.ExitCode() != 2 || strings.Count(msg, "\n") != 0 || !strings.Contains(msg, c.want) {
			t.Errorf("%v: exit %v, want 2 and one line with %q:\n%s", c.args, err, c.want, msg)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("%v: a refused run wrote %v", c.args, entries)
		}
	}
}

// --seed -1 draws a random seed, said on stderr and recorded in report.json; --prompt on an
// image-to-video model is recorded (as the server records an OpenAI create's prompt), not
// refused after the run started.
func TestGenerateRandomSeedAndRecordedPrompt(t *testing.T) {
	t.Parallel()
	img := testImage(t)
	out := filepath.Join(t.TempDir(), "out")
	cmd := exec.Command(vdpp(t), "generate", "--model", "builtin", "--image", img, "--height", "32", "--width", "32", "--steps", "1",
		"--num-frames", "2", "--seed", "-1", "--prompt", "an arrow", "--progress", "plain", "--out", out)
	b, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(b), "--seed -1: drew seed") || !strings.Contains(string(b), "the prompt is recorded") {
		t.Fatalf("%v\n%s", err, b)
	}
	raw, err := os.ReadFile(filepath.Join(out, "sample-000", "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Seed   int64  `json:"seed"`
		Prompt string `json:"prompt"`
	}
	if err := json.Unmarshal(raw, &rep); err != nil || rep.Seed < 0 || rep.Prompt != "an arrow" || !strings.Contains(string(b), "drew seed "+itoa64(rep.Seed)) {
		t.Fatalf("report %s (%v); output:\n%s", raw, err, b)
	}
}

func itoa64(v int64) string { b, _ := json.Marshal(v); return string(b) }
