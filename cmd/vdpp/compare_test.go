package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/eval"
)

func writeReport(t *testing.T, dir, name, split string, psnr ...float64) string {
	t.Helper()
	r := eval.Report{Model: name, Split: split, Rule: "heading", DataSeed: 1, Steps: 25, MinGuidance: 2, MaxGuidance: 4, DecodeChunk: 7}
	for i, p := range psnr {
		r.Clips = append(r.Clips, eval.ClipScore{Index: i, PSNRAfterFirst: p, SSIMAfterFirst: p / 100})
	}
	path := filepath.Join(dir, name+".json")
	if err := r.WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCompareCommand(t *testing.T) {
	dir := t.TempDir()
	a := writeReport(t, dir, "a", "heldout", 10, 20, 30)
	b := writeReport(t, dir, "b", "heldout", 11, 22, 30.5)
	train := writeReport(t, dir, "t", "train", 10, 20, 30)
	for _, tc := range []struct {
		name     string
		args     []string
		code     int
		out, err string
	}{
		{"paired", []string{a, b}, 0, "PSNR dB  20.000   21.167   +1.167", ""},
		{"settings", []string{a, b}, 0, "guidance 2-4, seed 0, decoded in 7-frame chunks", ""},
		{"other split", []string{a, train}, 2, "", "split \"heldout\" vs \"train\""},
		{"one report", []string{a}, 2, "", "got 1 arguments"},
		{"missing file", []string{a, filepath.Join(dir, "none.json")}, 1, "", "none.json"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"compare"}, tc.args...), &stdout, &stderr)
		if code != tc.code || !strings.Contains(stdout.String(), tc.out) || !strings.Contains(stderr.String(), tc.err) {
			t.Errorf("%s: exit %d (want %d)\nstdout: %s\nstderr: %s\nwant %q / %q", tc.name, code, tc.code, stdout.String(), stderr.String(), tc.out, tc.err)
		}
	}
}
