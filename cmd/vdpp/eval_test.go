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
