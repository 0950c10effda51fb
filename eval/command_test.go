package eval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/internal/cli"
	_ "github.com/vdpp/vdpp/model/families" // the built-in model
)

// runCommand parses args as `vdpp eval` does and runs the command.
func runCommand(t *testing.T, args ...string) (Report, string, error) {
	t.Helper()
	c := DefaultCommand()
	fs := cli.New("eval", nil, nil)
	c.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return Report{}, "", err
	}
	var stdout, progress bytes.Buffer
	rep, err := c.Run(context.Background(), &stdout, &progress)
	return rep, stdout.String(), err
}

// Options the command cannot take are usage errors naming the flag, before any model is
// loaded.
func TestCommandRefuses(t *testing.T) {
	for args, want := range map[string]string{
		"--split validation":           "--split",
		"--model synthetic":            "--model synthetic has no image encoder or VAE",
		"--cache sometimes":            "--cache",
		"--model /no/such/folder/here": "/no/such/folder/here",
	} {
		_, _, err := runCommand(t, strings.Fields(args)...)
		if !errors.Is(err, cli.ErrUsage) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want a usage error with %q", args, err, want)
		}
	}
}

// TestCommandBuiltinReportAndSheet runs `vdpp eval` on one held-out clip with a few steps:
// the JSON report carries the scores and baselines, and the contact sheet has three rows
// (truth, generated, VAE round trip).
func TestCommandBuiltinReportAndSheet(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the built-in model")
	}
	dir := t.TempDir()
	js, sheet := filepath.Join(dir, "eval.json"), filepath.Join(dir, "sheet.png")
	if _, out, err := runCommand(t, "--model", "builtin", "--num-samples", "1", "--steps", "2", "--json", js,
		"--sheet", sheet, "--media-clips", "1"); err != nil || !strings.Contains(out, "VAE round trip") {
		t.Fatalf("%v\n%s", err, out)
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

// TestCommandCache: `vdpp eval --cache` scores the cached model against its uncached videos
// and records the calls computed and both denoising times; a branch the UNet lacks is a
// usage error naming the flag.
func TestCommandCache(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the built-in model")
	}
	js := filepath.Join(t.TempDir(), "eval.json")
	if _, out, err := runCommand(t, "--model", "builtin", "--samples", "1", "--steps", "3", "--untrained=false", "--recon=false",
		"--cache", "static", "--cache-steps", "0,2", "--json", js); err != nil {
		t.Fatalf("%v\n%s", err, out)
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
	_, _, err = runCommand(t, "--model", "builtin", "--samples", "1", "--steps", "3", "--cache", "deepcache", "--cache-interval", "2", "--cache-branch", "7")
	if !errors.Is(err, cli.ErrUsage) || !strings.Contains(err.Error(), "--cache-branch 7") {
		t.Fatalf("%v; want a usage error naming --cache-branch", err)
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
	_, out, err := runCommand(t, "--model", "builtin-wan", "--num-samples", "1", "--steps", "6",
		"--cache", "fbcache", "--cache-threshold", "0.12", "--json", js)
	if err != nil {
		t.Fatal(err)
	}
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
	if _, _, err := runCommand(t, "--model", "builtin-wan"); !errors.Is(err, cli.ErrUsage) || !strings.Contains(err.Error(), "text-to-video model") || !strings.Contains(err.Error(), "--cache MODE") {
		t.Fatalf("%v; want a usage error asking for --cache", err)
	}
}
