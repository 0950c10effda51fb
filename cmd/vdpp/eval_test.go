package main

import (
	"bytes"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEvalBuiltinReportAndSheet runs `vdpp eval` on one held-out clip with a few steps: the
// JSON report carries the fields the issue names, and the contact sheet has three rows
// (truth, generated, VAE round trip).
func TestEvalBuiltinReportAndSheet(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the built-in model")
	}
	dir := t.TempDir()
	js, sheet := filepath.Join(dir, "eval.json"), filepath.Join(dir, "sheet.png")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"eval", "--model", "builtin", "--num-samples", "1", "--steps", "2", "--json", js,
		"--sheet", sheet, "--media-clips", "1"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	raw, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var rep map[string]any
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"psnr_after_first", "ssim_after_first", "baseline_repeat_first_psnr_after_first", "untrained_psnr_after_first"} {
		if v, ok := rep[k].(float64); !ok || v <= 0 {
			t.Errorf("%s = %v, want a positive number", k, rep[k])
		}
	}
	f, err := os.Open(sheet)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if h := img.Bounds().Dy(); h < 3*64 || h >= 4*64 {
		t.Errorf("sheet is %d px high, want three 64-px rows", h)
	}
}

// TestEvalSplitFlag: an unknown --split is a usage error (exit 2) that names the flag,
// before any model is loaded.
func TestEvalSplitFlag(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"eval", "--split", "validation"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "--split") {
		t.Fatalf("exit %d, stderr %q; want 2 naming --split", code, stderr.String())
	}
}

// TestEvalCache: `vdpp eval --cache` scores the cached model against its uncached videos
// and records the calls computed and both denoising times; a branch the UNet lacks is a
// usage error naming the flag.
func TestEvalCache(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the built-in model")
	}
	js := filepath.Join(t.TempDir(), "eval.json")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"eval", "--model", "builtin", "--samples", "1", "--steps", "3", "--untrained=false", "--recon=false",
		"--cache", "static", "--cache-steps", "0,2", "--json", js}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	raw, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		PSNR      float64 `json:"psnr_after_first"`
		Reference *struct {
			PSNR      float64 `json:"psnr_after_first"`
			TruthPSNR float64 `json:"reference_psnr_after_first"`
		} `json:"reference"`
		Cache *struct {
			Rule          string  `json:"rule"`
			ComputedCalls int     `json:"computed_calls"`
			Calls         int     `json:"calls"`
			Diffusion     float64 `json:"diffusion_s"`
			Reference     float64 `json:"reference_diffusion_s"`
		} `json:"cache"`
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Reference == nil || rep.Cache == nil {
		t.Fatalf("report without reference or cache:\n%s", raw)
	}
	// Guided: two calls per step, the middle step's two reused.
	if c := rep.Cache; c.ComputedCalls != 4 || c.Calls != 6 || c.Rule != "static steps 0,2" || !(c.Diffusion > 0 && c.Reference > 0) {
		t.Fatalf("cache record %+v", *c)
	}
	if r := rep.Reference; !(r.PSNR > 10 && r.PSNR < 100) || !(r.TruthPSNR > 0) {
		t.Fatalf("reference scores %+v", *r)
	}
	stderr.Reset()
	if code := run([]string{"eval", "--model", "builtin", "--samples", "1", "--steps", "3", "--cache", "deepcache", "--cache-interval", "2",
		"--cache-branch", "7"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "--cache-branch 7") {
		t.Fatalf("exit %d, stderr %q; want 2 naming --cache-branch", code, stderr.String())
	}
}

// TestEvalCacheText: `vdpp eval --cache` on a text-to-video model (the built-in Wan)
// generates its prompts with and without the cache and prints each video's PSNR/SSIM
// against its uncached twin and the cache's one line; without --cache it says why not.
func TestEvalCacheText(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the built-in Wan")
	}
	js := filepath.Join(t.TempDir(), "eval.json")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"eval", "--model", "builtin-wan", "--num-samples", "1", "--steps", "6",
		"--cache", "fbcache", "--cache-threshold", "0.12", "--json", js}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"video 0  PSNR", "cache fbcache threshold 0.12: against the uncached videos PSNR", "cache fbcache (threshold 0.12): computed", "; vs uncached: PSNR"} {
		if !strings.Contains(out, want) {
			t.Fatalf("stdout lacks %q:\n%s", want, out)
		}
	}
	raw, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		PSNR  float64 `json:"psnr"`
		SSIM  float64 `json:"ssim"`
		Clips []struct {
			Prompt string `json:"prompt"`
		} `json:"clips"`
		Cache struct {
			Calls int `json:"calls"`
		} `json:"cache"`
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	if !(rep.PSNR > 10) || !(rep.SSIM > 0 && rep.SSIM <= 1) || len(rep.Clips) != 1 || rep.Clips[0].Prompt == "" || rep.Cache.Calls != 12 {
		t.Fatalf("report %s", raw)
	}
	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"eval", "--model", "builtin-wan"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "text-to-video model") || !strings.Contains(stderr.String(), "--cache MODE") {
		t.Fatalf("exit %d, stderr %q; want 2 asking for --cache", code, stderr.String())
	}
}
