package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/vdpp/vdpp/builtin"
	"github.com/vdpp/vdpp/generate"
)

// runDemo is `vdpp demo [--out DIR] [--nproc K] [--num-samples N]`: the README's main
// command. It turns the bundled example image (a held-out first frame of the procedural
// dataset) into videos with the built-in model, first through a K-process step pipeline
// and then in one process, writes each sample's GIF, MP4 and frames, and prints the
// benchmark table (wall time, time per sample, speedup, and whether both runs produced
// the same bits).
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("demo", stdout, stderr)
	out := fs.String("out", "out/demo", "output folder")
	nproc := fs.Int("nproc", 2, "pipeline stages (processes) of the pipelined run")
	samples := fs.Int("num-samples", 4, "videos to generate (different seeds of the same image)")
	steps := fs.Int("steps", 25, "denoising steps")
	backend := fs.String("backend", "", "GoMLX backend (default: GOMLX_BACKEND or go)")
	baseline := fs.Bool("baseline", true, "also run the one-process baseline and compare")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *nproc < 1 || *samples < 1 || *steps < *nproc {
		return fmt.Errorf("%w: --nproc %d, --num-samples %d, --steps %d", errUsage, *nproc, *samples, *steps)
	}
	dir, err := builtin.Dir()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	img := filepath.Join(*out, "example.png")
	if err := os.WriteFile(img, builtin.ExamplePNG(), 0o644); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	fmt.Fprintf(stderr, "demo: built-in model %s, image %s\n", dir, img)
	run := func(k int, sub string) (time.Duration, []string, error) {
		o := generate.DefaultOptions()
		o.Model, o.Image, o.DecodeChunkSize = dir, img, builtin.DecodeChunkSize
		o.MinGuidance, o.MaxGuidance = builtin.MinGuidance, builtin.MaxGuidance
		o.Steps, o.NumSamples, o.NProc, o.Backend = *steps, *samples, k, *backend
		o.Out, o.Overwrite = filepath.Join(*out, sub), true // the demo's own folders: each run replaces them
		r := newGenerateRunner(stderr)
		start := time.Now()
		dirs, err := r.Run(ctx, o)
		return time.Since(start), dirs, err
	}
	type row struct {
		name  string
		k     int
		wall  time.Duration
		dirs  []string
		match string
	}
	var rows []row
	wall, dirs, err := run(*nproc, fmt.Sprintf("pipeline-%d", *nproc))
	if err != nil {
		return err
	}
	rows = append(rows, row{name: fmt.Sprintf("%d-stage pipeline", *nproc), k: *nproc, wall: wall, dirs: dirs})
	if *baseline && *nproc > 1 {
		w1, d1, err := run(1, "one-process")
		if err != nil {
			return err
		}
		rows = append(rows, row{name: "one process", k: 1, wall: w1, dirs: d1})
		rows[0].match = sameVideos(dirs, d1)
	}
	base := rows[len(rows)-1].wall
	fmt.Fprintf(stdout, "\n| run | processes | samples | wall (s) | s / sample | speedup | same bits as 1 process |\n")
	fmt.Fprintf(stdout, "|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		match := r.match
		if match == "" {
			match = "-"
		}
		fmt.Fprintf(stdout, "| %s | %d | %d | %.1f | %.2f | %.2fx | %s |\n", r.name, r.k, *samples,
			r.wall.Seconds(), r.wall.Seconds()/float64(*samples), base.Seconds()/r.wall.Seconds(), match)
	}
	fmt.Fprintf(stdout, "\nvideos (GIF, MP4, frames):\n")
	for _, d := range rows[0].dirs {
		fmt.Fprintf(stdout, "  %s\n", filepath.Join(d, "video.gif"))
	}
	return nil
}

// sameVideos reports whether two runs wrote byte-identical GIFs for every sample.
func sameVideos(a, b []string) string {
	if len(a) != len(b) || len(a) == 0 {
		return "no (sample count)"
	}
	for i := range a {
		x, err1 := os.ReadFile(filepath.Join(a[i], "video.gif"))
		y, err2 := os.ReadFile(filepath.Join(b[i], "video.gif"))
		if err1 != nil || err2 != nil || !bytes.Equal(x, y) {
			return "no"
		}
	}
	return "yes"
}
