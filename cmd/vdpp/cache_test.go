package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/bench"
	"github.com/vdpp/vdpp/internal/shared"
	"github.com/vdpp/vdpp/pipeline"
)

// cacheOf reads report.json's cache section; the raw text it returns leaves out the
// summary line (its times differ from run to run).
func cacheOf(t *testing.T, dir string) (pipeline.CacheSummary, string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "sample-000", "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Cache json.RawMessage `json:"cache"`
	}
	var c struct {
		pipeline.CacheSummary
		Calls []json.RawMessage `json:"calls"`
	}
	if err := json.Unmarshal(b, &r); err != nil || json.Unmarshal(r.Cache, &c) != nil {
		t.Fatalf("report.json has no cache section: %v\n%s", err, b)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(r.Cache, &fields); err != nil {
		t.Fatal(err)
	}
	delete(fields, "summary")
	raw, err := json.MarshalIndent(fields, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return c.CacheSummary, string(raw)
}

// A First Block Cache generation on wan-dev-cache gives bit-identical frames and the same
// decisions with 1 and 2 processes (the cache travels in the hand-off), report.json lists
// every call, and its computed steps, given back as a static schedule, compute exactly
// those steps.
func TestGenerateCachedBitIdentical(t *testing.T) {
	t.Parallel()
	dir := shared.Require(t, "golden", "wan-dev-cache")
	embeds := filepath.Join(dir, "cases", "full_pipeline_fbcache", "inputs.safetensors")
	common := []string{"--model", dir, "--prompt-embeds", embeds, "--negative-prompt-embeds", embeds, "--num-frames", "9",
		"--height", "64", "--width", "64", "--steps", "16", "--guidance-scale", "4", "--guidance-scale-2", "3"}
	fb := append(common, "--cache", "fbcache", "--cache-threshold", "0.1136")
	one := runGeneratePlain(t, append(fb, "--nproc", "1")...)
	two := runGeneratePlain(t, append(fb, "--nproc", "2")...)
	requireSameFrames(t, one, two, "sample-000", 9, "2 processes with the cache")
	c1, raw1 := cacheOf(t, one)
	_, raw2 := cacheOf(t, two)
	if raw1 != raw2 {
		t.Fatalf("the cache records differ between 1 and 2 processes:\n%s\n%s", raw1, raw2)
	}
	if c1.Mode != "fbcache" || c1.TotalCalls != 32 || c1.ComputedCalls >= c1.TotalCalls || c1.ComputedCalls < 4 || !strings.Contains(raw1, `"uncond"`) {
		t.Fatalf("cache section %s", raw1)
	}
	plain := runGeneratePlain(t, append(common, "--nproc", "1")...)
	if bytes.Equal(framePixels(t, filepath.Join(one, "sample-000", "frames", "004.png")), framePixels(t, filepath.Join(plain, "sample-000", "frames", "004.png"))) {
		t.Fatal("the cached frames are the uncached ones")
	}
	static := runGeneratePlain(t, append(common, "--nproc", "2", "--cache", "static", "--cache-steps", filepath.Join(one, "sample-000", "report.json"))...)
	cs, raw := cacheOf(t, static)
	if cs.ComputedSteps != c1.ComputedSteps || cs.Steps != c1.ComputedSteps {
		t.Fatalf("static schedule from %s computed steps %q (rule %q), want %q\n%s", one, cs.ComputedSteps, cs.Steps, c1.ComputedSteps, raw)
	}
}

// Bad cache flags are one line naming the flag, before any worker starts.
func TestGenerateCacheBadInput(t *testing.T) {
	t.Parallel()
	dir := shared.Require(t, "golden", "wan-dev-cache")
	embeds := filepath.Join(dir, "cases", "full_pipeline_fbcache", "inputs.safetensors")
	common := []string{"generate", "--model", dir, "--prompt-embeds", embeds, "--negative-prompt-embeds", embeds, "--num-frames", "9",
		"--height", "64", "--width", "64", "--nproc", "2", "--out", t.TempDir()}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--steps", "8", "--cache", "teacache"}, `flag --cache: "teacache" must be one of none, fbcache, deepcache, static`},
		{[]string{"--steps", "8", "--cache", "fbcache", "--cache-threshold", "0"}, "flag --cache-threshold: 0 must be in (0, 1000]"},
		{[]string{"--steps", "8", "--cache", "deepcache"}, `--cache "deepcache" must be one of none, fbcache, static`},
		{[]string{"--steps", "8", "--cache-threshold", "0.1"}, "--cache-threshold applies to --cache fbcache only, and no cache is set"},
		{[]string{"--steps", "8", "--cache", "static", "--cache-steps", "0-7"}, "computes every step"},
		{[]string{"--steps", "8", "--cache", "static", "--cache-steps", "0,x"}, `flag --cache-steps: "0,x": "x" is not a step`},
		{[]string{"--steps", "2", "--cache", "fbcache"}, "nothing can be reused"},
	} {
		out, err := exec.Command(vdpp(t), append(common, c.args...)...).CombinedOutput()
		msg := strings.TrimSpace(string(out))
		if err == nil || strings.Count(msg, "\n") != 0 || !strings.Contains(msg, c.want) {
			t.Errorf("%v: want one line containing %q, got (%v):\n%s", c.args, c.want, err, msg)
		}
	}
}

// benchCacheRun runs `vdpp bench --json` and decodes the whole report.
func benchCacheRun(t *testing.T, args ...string) bench.Report {
	t.Helper()
	out := filepath.Join(t.TempDir(), "bench.json")
	cmd := exec.Command(vdpp(t), append([]string{"bench", "--model", "synthetic", "--num-frames", "4", "--height", "128", "--width", "128", "--json", out}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("vdpp bench %v: %v\n%s", args, err, stderr.String())
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rep, err := bench.ReadReport(f)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// vdpp bench with a cache: the pipeline's cached latents equal the one-rank cached run's,
// every sample's calls are listed, and the same mesh also ran uncached in the same
// invocation. A static schedule cuts the stages by computed work.
func TestBenchCache(t *testing.T) {
	t.Parallel()
	t.Run("fbcache pp2 x cfg2", func(t *testing.T) {
		t.Parallel()
		rep := benchCacheRun(t, "--pp", "2", "--cfg", "2", "--steps", "8", "--num-samples", "3", "--warmup-samples", "1",
			"--step-ms", "0", "--cache", "fbcache", "--cache-threshold", "0.05")
		if rep.EqualToBaseline == nil || !*rep.EqualToBaseline {
			t.Fatal("the cached pipeline differs from the cached one-rank baseline")
		}
		if len(rep.CacheSamples) != 3 || rep.TotalCalls != 3*2*8 || rep.ComputedCalls >= rep.TotalCalls || rep.ComputedCalls == 0 {
			t.Fatalf("cache records: %d samples, %d of %d calls computed", len(rep.CacheSamples), rep.ComputedCalls, rep.TotalCalls)
		}
		for _, s := range rep.CacheSamples {
			if len(s.Calls) != 16 || s.Calls[1].Branch != "uncond" {
				t.Fatalf("sample %d: calls %v", s.Sample, s.Calls)
			}
		}
		if rep.UncachedSteadySampleMS <= 0 || rep.CacheSpeedup <= 0 || rep.MaxRelL2VsUncached == nil || *rep.MaxRelL2VsUncached == 0 {
			t.Fatalf("no uncached comparison: %+v", rep)
		}
		if want := fmt.Sprintf("cache fbcache (threshold 0.05): computed %d of 48 calls", rep.ComputedCalls); !strings.HasPrefix(rep.CacheLine, want) ||
			!strings.Contains(rep.CacheLine, "saved") || !strings.Contains(rep.CacheLine, "latent change at the") {
			t.Fatalf("cache line %q, want %q... with the time saved and the latent change", rep.CacheLine, want)
		}
	})
	t.Run("static cut by computed work", func(t *testing.T) {
		t.Parallel()
		// Steps 0-5 compute, 6-11 reuse at 1/8 of a step: 3 + 3.75 is the balanced cut.
		rep := benchCacheRun(t, "--nproc", "2", "--steps", "12", "--num-samples", "2", "--warmup-samples", "0",
			"--step-ms", "0", "--cache", "static", "--cache-steps", "0-5")
		if want := [][2]int{{0, 3}, {3, 12}}; len(rep.StageSteps) != 2 || rep.StageSteps[0] != want[0] || rep.StageSteps[1] != want[1] {
			t.Fatalf("stage steps %v, want %v", rep.StageSteps, want)
		}
		if rep.ComputedCalls != 2*6 || rep.CacheSamples[0].ComputedSteps != "0-5" {
			t.Fatalf("%d calls computed, steps %q", rep.ComputedCalls, rep.CacheSamples[0].ComputedSteps)
		}
	})
}

// SVD's step caches travel in the hand-off too: DeepCache (the kept feature) and the
// adaptive rule (first block and denoised estimate) give bit-identical frames and the same
// decisions with 1 and 2 processes on the dev checkpoint, and each reuses some calls.
func TestGenerateSVDCachedBitIdentical(t *testing.T) {
	t.Parallel()
	dev := shared.Require(t, "golden", "dev")
	common := []string{"--model", dev, "--image", testImage(t), "--height", "32", "--width", "32", "--steps", "6", "--seed", "3"}
	for _, mode := range [][]string{
		{"--cache", "deepcache", "--cache-interval", "2", "--cache-branch", "1"},
		{"--cache", "fbcache", "--cache-threshold", "0.5"},
	} {
		args := append(append([]string(nil), common...), mode...)
		one := runGeneratePlain(t, append(args, "--nproc", "1")...)
		two := runGeneratePlain(t, append(args, "--nproc", "2")...)
		requireSameFrames(t, one, two, "sample-000", 3, "2 processes with "+mode[1])
		c, raw1 := cacheOf(t, one)
		if _, raw2 := cacheOf(t, two); raw1 != raw2 {
			t.Fatalf("%s: the cache records differ between 1 and 2 processes:\n%s\n%s", mode[1], raw1, raw2)
		}
		if c.Mode != mode[1] || c.TotalCalls != 12 || c.ComputedCalls >= c.TotalCalls || c.ComputedCalls < 2 {
			t.Fatalf("%s: cache section %s", mode[1], raw1)
		}
	}
}

// generateStderr runs `vdpp generate` and returns its output folder and stderr.
func generateStderr(t *testing.T, args ...string) (string, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs vdpp generate end to end (the full tier, without -short, runs it)")
	}
	out := filepath.Join(t.TempDir(), "out")
	// Without the race detector, as runGeneratePlain: the lines and numbers are checked.
	cmd := exec.Command(vdppPlain(t), append([]string{"generate", "--out", out, "--progress", "plain"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("vdpp generate %v: %v\n%s", args, err, stderr.String())
	}
	return out, stderr.String()
}

// A cached generation prints one line about its cache: on the built-in Wan, the default
// threshold reuses nothing and the line says so and suggests a threshold; a higher one
// reuses, and --cache-check prints the PSNR/SSIM against the uncached run (kept under
// OUT/uncached) and records the comparison in report.json; on the built-in SVD the line
// gives the estimated time saved and the latent change at the reuses.
func TestGenerateCacheLine(t *testing.T) {
	t.Parallel()
	wan := []string{"--model", "builtin-wan", "--prompt", "a red fox", "--steps", "8", "--num-frames", "5"}
	_, stderr := generateStderr(t, append(wan, "--cache", "fbcache")...)
	if !regexpMatch(`generate: cache fbcache \(threshold 0\.05\): computed all 16 calls, nothing saved; --cache-threshold [0-9.]+ would have reused about \d+ of the \d+ calls that compared`, stderr) {
		t.Fatalf("no nothing-saved line with a suggestion:\n%s", stderr)
	}
	out, stderr := generateStderr(t, append(wan, "--cache", "fbcache", "--cache-threshold", "0.15", "--cache-check")...)
	if !regexpMatch(`generate: cache fbcache \(threshold 0\.15\): computed \d+ of 16 calls, \d+ of 8 steps; denoising [0-9.]+ s, ([0-9.]+ s saved \(\d+%\)|none saved: the uncached run took [0-9.]+ s); vs uncached: PSNR [0-9.]+ dB, SSIM [0-9.]+`, stderr) {
		t.Fatalf("no cache line with the check:\n%s", stderr)
	}
	c, raw := cacheOf(t, out)
	if c.Check == nil || !(c.Check.PSNR > 10) || !(c.Check.UncachedMS > 0) || !strings.Contains(c.Summary, "vs uncached: PSNR") {
		t.Fatalf("report.json's cache has no check: %s", raw)
	}
	if _, err := os.Stat(filepath.Join(out, "uncached", "sample-000", "report.json")); err != nil {
		t.Fatalf("the uncached run: %v", err)
	}
	_, stderr = generateStderr(t, "--model", "builtin", "--image", "../../builtin/example.png", "--steps", "6", "--num-frames", "4", "--cache", "fbcache")
	if !regexpMatch(`generate: cache fbcache \(threshold 0\.05\): computed \d+ of 12 calls, \d+ of 6 steps; denoising [0-9.]+ s, about [0-9.]+ s saved \(\d+%, estimated\); latent change at the \d+ reuses: max [0-9.e-]+, mean [0-9.e-]+ \(--cache-check measures PSNR/SSIM\)`, stderr) {
		t.Fatalf("no cache line on the built-in model:\n%s", stderr)
	}
	cmd := exec.Command(vdpp(t), append([]string{"generate", "--out", filepath.Join(t.TempDir(), "x"), "--cache-check"}, wan...)...)
	if b, err := cmd.CombinedOutput(); cmd.ProcessState.ExitCode() != 2 || !strings.Contains(string(b), "--cache-check compares a cached run") {
		t.Fatalf("--cache-check without --cache: %v\n%s", err, b)
	}
}

func regexpMatch(re, s string) bool { return regexp.MustCompile(re).MatchString(s) }
