package main

import (
	"bytes"
	"encoding/json"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/internal/shared"
)

func testImage(t *testing.T) string {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, 48, 40))
	for i := range img.Pix {
		img.Pix[i] = uint8(i*13 + i/7)
	}
	p := filepath.Join(t.TempDir(), "in.png")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := png.Encode(f, img); err != nil {
		t.Fatal(err)
	}
	return p
}

func runGenerateBin(t *testing.T, args ...string) string {
	t.Helper()
	return runGenerateWith(t, vdpp(t), args...)
}

// runGeneratePlain is runGenerateBin with vdpp built without the race detector (vdppPlain),
// for the tests of what generate computes (bits across meshes, cache decisions, defaults),
// whose processes' concurrent code runs under the detector in the other generate tests.
func runGeneratePlain(t *testing.T, args ...string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs vdpp generate end to end (the full tier, without -short, runs it)")
	}
	return runGenerateWith(t, vdppPlain(t), args...)
}

// runGenerateWith runs `bin generate --out OUT args...` and returns OUT.
func runGenerateWith(t *testing.T, bin string, args ...string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	cmd := exec.Command(bin, append([]string{"generate", "--out", out}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("vdpp generate %v: %v\n%s", args, err, stderr.String())
	}
	return out
}

// The same seed gives bit-identical frames with 1 or K processes, and every output exists.
func TestGenerateStagesBitIdentical(t *testing.T) {
	t.Parallel()
	dev := shared.Require(t, "golden", "dev")
	img := testImage(t)
	common := []string{"--model", dev, "--image", img, "--height", "32", "--width", "32", "--steps", "2", "--num-samples", "2", "--seed", "5"}
	one := runGenerateBin(t, append(common, "--nproc", "1")...)
	two := runGenerateBin(t, append(common, "--nproc", "2")...)
	for _, s := range []string{"sample-000", "sample-001"} {
		for _, f := range []string{"video.gif", "video.mp4", "report.json", "frames/000.png", "frames/002.png"} {
			if _, err := os.Stat(filepath.Join(two, s, f)); err != nil {
				t.Errorf("missing output: %v", err)
			}
		}
		frames, _ := filepath.Glob(filepath.Join(one, s, "frames", "*.png"))
		if len(frames) == 0 {
			t.Fatalf("no frames in %s", filepath.Join(one, s))
		}
		for _, f := range frames {
			if !bytes.Equal(framePixels(t, f), framePixels(t, filepath.Join(two, s, "frames", filepath.Base(f)))) {
				t.Fatalf("%s/%s differs between 1 and 2 processes", s, filepath.Base(f))
			}
		}
	}
	// Different seeds give different videos.
	a := framePixels(t, filepath.Join(one, "sample-000", "frames", "001.png"))
	b := framePixels(t, filepath.Join(one, "sample-001", "frames", "001.png"))
	if bytes.Equal(a, b) {
		t.Fatal("samples 0 and 1 are identical")
	}
	rep, _ := os.ReadFile(filepath.Join(two, "sample-000", "report.json"))
	for _, key := range []string{`"vae_decoder"`, `"image_encoder"`, `"decode_ms"`, `"conditioning_ms"`, `"std"`} {
		if !strings.Contains(string(rep), key) {
			t.Errorf("report.json lacks %s", key)
		}
	}
}

// A sampler that draws noise at every step (euler-a) gives the same frames in one process
// with two-sample micro-batches as on a 2-stage pipeline with single samples: the noise is
// keyed by seed, sample and step. The report names the sampler.
func TestGenerateSchedulerBitIdentical(t *testing.T) {
	t.Parallel()
	dev := shared.Require(t, "golden", "dev")
	img := testImage(t)
	common := []string{"--model", dev, "--image", img, "--height", "32", "--width", "32", "--steps", "3", "--num-samples", "2", "--seed", "5", "--scheduler", "euler-a"}
	one := runGenerateBin(t, append(common, "--nproc", "1", "--micro-batch", "2")...)
	two := runGenerateBin(t, append(common, "--nproc", "2")...)
	for _, s := range []string{"sample-000", "sample-001"} {
		frames, _ := filepath.Glob(filepath.Join(one, s, "frames", "*.png"))
		if len(frames) == 0 {
			t.Fatalf("no frames in %s", filepath.Join(one, s))
		}
		for _, f := range frames {
			a, _ := os.ReadFile(f)
			b, err := os.ReadFile(filepath.Join(two, s, "frames", filepath.Base(f)))
			if err != nil || !bytes.Equal(a, b) {
				t.Fatalf("%s/%s differs between 1 and 2 processes", s, filepath.Base(f))
			}
		}
	}
	rep, _ := os.ReadFile(filepath.Join(two, "sample-001", "report.json"))
	if !strings.Contains(string(rep), `"sampler": "euler-a"`) {
		t.Errorf("report.json does not name the scheduler:\n%s", rep)
	}
}

func TestGenerateBadInputOneLine(t *testing.T) {
	t.Parallel()
	dev := shared.Require(t, "golden", "dev")
	notImage := filepath.Join(t.TempDir(), "x.png")
	os.WriteFile(notImage, []byte("plain text"), 0o644)
	cmd := exec.Command(vdpp(t), "generate", "--model", dev, "--image", notImage, "--out", t.TempDir(), "--nproc", "2", "--steps", "2")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatal("accepted a non-image")
	}
	msg := strings.TrimSpace(string(out))
	if strings.Count(msg, "\n") != 0 || !strings.Contains(msg, "x.png") || strings.Contains(msg, "panic") {
		t.Fatalf("want one line naming x.png, got:\n%s", msg)
	}
}

// Decoding spread over ranks (--decode-ranks) gives the frames and pixel statistics of the
// one-process run (--decode-chunk-size 1: one part per frame, handed out over both ranks;
// spreading whole samples is the one-part case of pipeline/spread_test.go).
func TestGenerateDecodeSpreadBitIdentical(t *testing.T) {
	t.Parallel()
	dev := shared.Require(t, "golden", "dev")
	img := testImage(t)
	common := []string{"--model", dev, "--image", img, "--height", "32", "--width", "32", "--steps", "2", "--num-frames", "3",
		"--num-samples", "2", "--seed", "5", "--decode-chunk-size", "1"}
	one := runGenerateBin(t, append(common, "--nproc", "1")...)
	spread := runGenerateBin(t, append(common, "--nproc", "2", "--decode-ranks", "2")...)
	for _, s := range []string{"sample-000", "sample-001"} {
		requireSameFrames(t, one, spread, s, 3, "decoding over 2")
		ra, _ := os.ReadFile(filepath.Join(one, s, "report.json"))
		rb, _ := os.ReadFile(filepath.Join(spread, s, "report.json"))
		if pa, pb := pixelStats(t, ra), pixelStats(t, rb); pa != pb {
			t.Fatalf("%s pixel stats differ: %s vs %s", s, pa, pb)
		}
		if !strings.Contains(string(rb), `"decode_ranks": 2`) || !strings.Contains(string(rb), `"vae_decoder"`) {
			t.Errorf("report.json lacks decode_ranks 2 or the decoder's weights:\n%s", rb)
		}
	}
}

// A decode-aware step cut (--decode-steps: the decode costs 10 steps, so the decoding last
// stage keeps one of the 3 steps) moves steps between ranks and keeps the frames of the
// one-process run.
func TestGenerateDecodeAwareCutBitIdentical(t *testing.T) {
	t.Parallel()
	dev := shared.Require(t, "golden", "dev")
	img := testImage(t)
	common := []string{"--model", dev, "--image", img, "--height", "32", "--width", "32", "--steps", "3", "--num-frames", "3",
		"--num-samples", "1", "--seed", "5"}
	one := runGenerateBin(t, append(common, "--nproc", "1")...)
	cut := runGenerateBin(t, append(common, "--nproc", "2", "--decode-steps", "10")...)
	requireSameFrames(t, one, cut, "sample-000", 3, "the decode-aware cut")
	rep, _ := os.ReadFile(filepath.Join(cut, "sample-000", "report.json"))
	var r struct {
		Stages []struct {
			Steps   [2]int `json:"steps"`
			Kernels string `json:"kernels"`
		} `json:"stages"`
	}
	if err := json.Unmarshal(rep, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Stages) != 2 || r.Stages[0].Steps != [2]int{0, 2} || r.Stages[1].Steps != [2]int{2, 3} {
		t.Fatalf("stages %+v, want steps [0,2) and [2,3)", r.Stages)
	}
	for _, s := range r.Stages {
		if !strings.HasPrefix(s.Kernels, "go: ") && !strings.HasPrefix(s.Kernels, "xla") {
			t.Errorf("stage %v: kernels %q, want the backend's kernels", s.Steps, s.Kernels)
		}
	}
}

// requireSameFrames requires sample's n PNG frames in the run folder other to be the bytes
// of those in one (the one-process run); what names the other run in the failure.
func requireSameFrames(t *testing.T, one, other, sample string, n int, what string) {
	t.Helper()
	frames, _ := filepath.Glob(filepath.Join(one, sample, "frames", "*.png"))
	if len(frames) != n {
		t.Fatalf("%d frames in %s, want %d", len(frames), filepath.Join(one, sample), n)
	}
	for _, f := range frames {
		if !bytes.Equal(framePixels(t, f), framePixels(t, filepath.Join(other, sample, "frames", filepath.Base(f)))) {
			t.Fatalf("%s/%s differs between one rank and %s", sample, filepath.Base(f), what)
		}
	}
}

// pixelStats returns the pixel_stats object of a report.json, as text.
func pixelStats(t *testing.T, report []byte) string {
	t.Helper()
	var r struct {
		Pixels json.RawMessage `json:"pixel_stats"`
	}
	if err := json.Unmarshal(report, &r); err != nil || len(r.Pixels) == 0 {
		t.Fatalf("report.json: %v\n%s", err, report)
	}
	return string(r.Pixels)
}

// Wan's causal VAE decodes a sample whole (its cache runs through every frame), so
// --decode-ranks spreads whole samples: sample 1 decodes on rank 0, with the frames of the
// one-process run.
func TestGenerateWanDecodeSpreadBySample(t *testing.T) {
	t.Parallel()
	dev := shared.Require(t, "golden", "wan-dev")
	embeds := filepath.Join(dev, "cases", "full_pipeline_moe", "inputs.safetensors")
	common := []string{"--model", dev, "--prompt-embeds", embeds, "--negative-prompt-embeds", embeds, "--num-frames", "5",
		"--height", "32", "--width", "32", "--steps", "2", "--num-samples", "2", "--seed", "3"}
	one := runGenerateBin(t, append(common, "--nproc", "1")...)
	spread := runGenerateBin(t, append(common, "--nproc", "2", "--decode-ranks", "2")...)
	for _, s := range []string{"sample-000", "sample-001"} {
		requireSameFrames(t, one, spread, s, 5, "decoding over 2")
		ra, _ := os.ReadFile(filepath.Join(one, s, "report.json"))
		rb, _ := os.ReadFile(filepath.Join(spread, s, "report.json"))
		if pa, pb := pixelStats(t, ra), pixelStats(t, rb); pa != pb {
			t.Fatalf("%s pixel stats differ: %s vs %s", s, pa, pb)
		}
	}
}
