package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

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
		{[]string{"--steps", "8", "--cache", "teacache"}, `--cache "teacache"`},
		{[]string{"--steps", "8", "--cache", "fbcache", "--cache-threshold", "0"}, "--cache-threshold 0 must be > 0"},
		{[]string{"--steps", "8", "--cache", "deepcache"}, "the wan family offers fbcache, static"},
		{[]string{"--steps", "8", "--cache", "static", "--cache-steps", "0-7"}, "computes every step"},
		{[]string{"--steps", "8", "--cache", "static", "--cache-steps", "0,x"}, `--cache-steps "0,x"`},
		{[]string{"--steps", "2", "--cache", "fbcache"}, "nothing can be reused"},
	} {
		out, err := exec.Command(vdppBin, append(common, c.args...)...).CombinedOutput()
		msg := strings.TrimSpace(string(out))
		if err == nil || strings.Count(msg, "\n") != 0 || !strings.Contains(msg, c.want) {
			t.Errorf("%v: want one line containing %q, got (%v):\n%s", c.args, c.want, err, msg)
		}
	}
}
