package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/vdpp/vdpp/generate"
)

// The built-in Wan image-to-video model through the real binary: --image with --prompt
// (encoded by its umT5 on the first stage, the image by its CLIP and VAE encoder there too)
// gives bit-identical frames in one process and in two pipeline stages, and report.json
// names the image.
func TestGenerateWanI2V(t *testing.T) {
	t.Parallel()
	img := filepath.Join("..", "..", "builtin", "example.png")
	common := []string{"--model", "builtin-wan-i2v", "--image", img, "--prompt", "an arrow flies to the right",
		"--num-frames", "9", "--height", "32", "--width", "48", "--steps", "3", "--seed", "4"}
	with := func(args ...string) []string { return append(append([]string(nil), common...), args...) }
	one := runGenerateBin(t, with("--nproc", "1")...)
	two := runGenerateBin(t, with("--nproc", "2")...)
	a, b := readFrames(t, one), readFrames(t, two)
	if len(a) != 9 || !sameFrames(a, b) {
		t.Fatalf("%d frames in one process, %d in two; want 9 bit-identical", len(a), len(b))
	}
	data, err := os.ReadFile(filepath.Join(two, "sample-000", "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep generate.SampleReport
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Image != img || rep.Prompt == "" {
		t.Fatalf("report image %q prompt %q", rep.Image, rep.Prompt)
	}
}
