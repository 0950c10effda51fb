package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/bench"
	"github.com/vdpp/vdpp/internal/shared"
	"github.com/vdpp/vdpp/pipeline"
)

// cacheOf reads report.json's cache section.
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
	return c.CacheSummary, string(r.Cache)
}

// A First Block Cache generation on wan-dev-cache gives bit-identical frames and the same
// decisions with 1 and 2 processes (the cache travels in the hand-off), report.json lists
// every call, and its computed steps, given back as a static schedule, compute exactly
// those steps.
func TestGenerateCachedBitIdentical(t *testing.T) {
	dir := shared.Require(t, "golden", "wan-dev-cache")
	embeds := filepath.Join(dir, "cases", "full_pipeline_fbcache", "inputs.safetensors")
	common := []string{"--model", dir, "--prompt-embeds", embeds, "--negative-prompt-embeds", embeds, "--num-frames", "9",
		"--height", "64", "--width", "64", "--steps", "16", "--guidance-scale", "4", "--guidance-scale-2", "3"}
	fb := append(common, "--cache", "fbcache", "--cache-threshold", "0.1136")
	one := runGenerateBin(t, append(fb, "--nproc", "1")...)
	two := runGenerateBin(t, append(fb, "--nproc", "2")...)
	requireSameFrames(t, one, two, "sample-000", 9, "2 processes with the cache")
	c1, raw1 := cacheOf(t, one)
	_, raw2 := cacheOf(t, two)
	if raw1 != raw2 {
		t.Fatalf("the cache records differ between 1 and 2 processes:\n%s\n%s", raw1, raw2)
	}
	if c1.Mode != "fbcache" || c1.TotalCalls != 32 || c1.ComputedCalls >= c1.TotalCalls || c1.ComputedCalls < 4 || !strings.Contains(raw1, `"uncond"`) {
		t.Fatalf("cache section %s", raw1)
	}
	plain := runGenerateBin(t, append(common, "--nproc", "1")...)
	a, _ := os.ReadFile(filepath.Join(one, "sample-000", "frames", "004.png"))
	b, _ := os.ReadFile(filepath.Join(plain, "sample-000", "frames", "004.png"))
	if bytes.Equal(a, b) {
		t.Fatal("the cached frames are the uncached ones")
	}
	static := runGenerateBin(t, append(common, "--nproc", "2", "--cache", "static", "--cache-steps", filepath.Join(one, "sample-000", "report.json"))...)
	cs, raw := cacheOf(t, static)
	if cs.ComputedSteps != c1.ComputedSteps || cs.Steps != c1.ComputedSteps {
		t.Fatalf("static schedule from %s computed steps %q (rule %q), want %q\n%s", one, cs.ComputedSteps, cs.Steps, c1.ComputedSteps, raw)
	}
}

// Bad cache flags are one line naming the flag, before any worker starts.
func TestGenerateCacheBadInput(t *testing.T) {
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
		out, err := exec.Command(vdppBin, append(common, c.args...)...).CombinedOutput()
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
	cmd := exec.Command(vdppBin, append([]string{"bench", "--model", "synthetic", "--num-frames", "4", "--height", "128", "--width", "128", "--json", out}, args...)...)
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
	t.Run("fbcache pp2 x cfg2", func(t *testing.T) {
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
	})
	t.Run("static cut by computed work", func(t *testing.T) {
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
	dev := shared.Require(t, "golden", "dev")
	common := []string{"--model", dev, "--image", testImage(t), "--height", "32", "--width", "32", "--steps", "6", "--seed", "3"}
	for _, mode := range [][]string{
		{"--cache", "deepcache", "--cache-interval", "2", "--cache-branch", "1"},
		{"--cache", "fbcache", "--cache-threshold", "0.5"},
	} {
		args := append(append([]string(nil), common...), mode...)
		one := runGenerateBin(t, append(args, "--nproc", "1")...)
		two := runGenerateBin(t, append(args, "--nproc", "2")...)
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
