package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/internal/shared"
)

// readFrames returns the pixels of the PNG frames of sample 0 of a generate output folder.
func readFrames(t *testing.T, out string) [][]byte {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(out, "sample-000", "frames", "*.png"))
	var frames [][]byte
	for _, p := range paths {
		frames = append(frames, framePixels(t, p))
	}
	return frames
}

func sameFrames(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// Long Wan videos through the real binary on the dev checkpoint (two experts, UniPC, CFG):
// windows are cut in latent frames (17 frames = 5 latent frames; --window 9 --overlap 4 =
// windows of 3 latent frames sharing 1, at latent frames 0 and 2). A video of one window is
// bit-identical to the plain run; a video of two windows is bit-identical with 1 and 2
// pipeline stages (the windows and the solver's state travel with the item) and differs
// from the plain run of the same length.
func TestGenerateWanWindows(t *testing.T) {
	t.Parallel()
	dev := shared.Require(t, "golden", "wan-dev")
	embeds := filepath.Join(dev, "cases", "full_pipeline_moe", "inputs.safetensors")
	common := []string{"--model", dev, "--prompt-embeds", embeds, "--negative-prompt-embeds", embeds,
		"--height", "32", "--width", "32", "--steps", "4", "--seed", "7", "--guidance-scale", "4"}
	with := func(args ...string) []string { return append(append([]string(nil), common...), args...) }

	plain9 := readFrames(t, runGeneratePlain(t, with("--num-frames", "9")...))
	one := readFrames(t, runGeneratePlain(t, with("--num-frames", "9", "--window", "9", "--overlap", "4")...))
	if len(plain9) != 9 || !sameFrames(plain9, one) {
		t.Fatalf("one window (%d frames) differs from the plain run (%d frames)", len(one), len(plain9))
	}

	k1 := readFrames(t, runGeneratePlain(t, with("--num-frames", "17", "--window", "9", "--overlap", "4", "--blend", "linear", "--nproc", "1")...))
	k2 := readFrames(t, runGeneratePlain(t, with("--num-frames", "17", "--window", "9", "--overlap", "4", "--blend", "linear", "--nproc", "2")...))
	if len(k1) != 17 || !sameFrames(k1, k2) {
		t.Fatalf("two windows: %d frames with 1 stage, %d with 2; want 17 bit-identical", len(k1), len(k2))
	}
	plain17 := readFrames(t, runGeneratePlain(t, with("--num-frames", "17")...))
	if sameFrames(plain17, k1) {
		t.Fatal("--window 9 gave the plain 17-frame video: no windows ran")
	}
}

// Bad windows for a Wan model are one line each, before anything loads.
func TestGenerateWanWindowErrors(t *testing.T) {
	t.Parallel()
	dev := shared.Require(t, "golden", "wan-dev")
	embeds := filepath.Join(dev, "cases", "full_pipeline_moe", "inputs.safetensors")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--num-frames", "17", "--window", "9", "--overlap", "12"}, "--overlap 12 must be shorter than --window 9"},
		{[]string{"--num-frames", "17", "--window", "10", "--overlap", "4"}, "a window takes 1 + 4k frames (e.g. 9 or 13)"},
		{[]string{"--num-frames", "17", "--window", "9", "--overlap", "2"}, "an overlap is a multiple of 4 frames"},
		{[]string{"--num-frames", "85", "--window", "85"}, "--window 85 is longer than the model's 81 frames"},
		{[]string{"--num-frames", "5", "--window", "9"}, "--num-frames 5 is fewer than one --window of 9"},
	} {
		args := append([]string{"generate", "--out", t.TempDir(), "--model", dev, "--prompt-embeds", embeds,
			"--negative-prompt-embeds", embeds, "--height", "32", "--width", "32", "--steps", "2"}, c.args...)
		var stderr bytes.Buffer
		cmd := exec.Command(vdpp(t), args...)
		cmd.Stderr = &stderr
		err := cmd.Run()
		msg := strings.TrimSpace(stderr.String())
		if err == nil || !strings.Contains(msg, c.want) || strings.Count(msg, "\n") > 0 {
			t.Errorf("%v: %v, stderr %q; want one line with %q", c.args, err, msg, c.want)
		}
	}
}
