package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/vdpp/vdpp/builtin"
	"github.com/vdpp/vdpp/generate"
)

// runDemo is `vdpp demo [--out DIR] [--nproc K] [--num-samples N]`: the README's main
// command. It turns the bundled example image (a held-out first frame of the procedural
// dataset) into videos with the built-in model, through a K-process step pipeline and in
// one process, writes each sample's GIF, MP4 and frames, and prints the benchmark table
// (wall time, time per sample, speedup, and whether the runs produced the same bits). It
// then runs both again with one core per process (the pipeline's K stages on K cores, as
// each stage would have its own device, against one process on one core) and says what
// each speedup means on the machine it runs on.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("demo", stdout, stderr)
	out := fs.String("out", "out/demo", "output `DIR`")
	nproc := fs.Int("nproc", 2, "pipeline stages (processes) of the pipelined run")
	samples := fs.Int("num-samples", 4, "videos to generate (different seeds of the same image)")
	steps := fs.Int("steps", 25, "denoising steps")
	backend := fs.String("backend", "", "GoMLX backend (default: GOMLX_BACKEND or go)")
	baseline := fs.Bool("baseline", true, "also run the one-process baseline and compare")
	perCore := fs.Bool("one-core-per-stage", true, "with --baseline: also run both with one core per process (Linux, taskset)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case *nproc < 1:
		return fmt.Errorf("%w: --nproc %d: the pipeline needs at least 1 stage", errUsage, *nproc)
	case *samples < 1:
		return fmt.Errorf("%w: --num-samples %d: at least 1 video", errUsage, *samples)
	case *steps < *nproc:
		return fmt.Errorf("%w: --steps %d cannot fill --nproc %d stages: every stage needs at least one step", errUsage, *steps, *nproc)
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
	run := func(k int, sub string, pin bool) (time.Duration, []string, error) {
		o := generate.DefaultOptions()
		o.Model, o.Image, o.DecodeChunkSize = dir, img, builtin.DecodeChunkSize
		o.MinGuidance, o.MaxGuidance = builtin.MinGuidance, builtin.MaxGuidance
		o.Steps, o.NumSamples, o.NProc, o.Backend = *steps, *samples, k, *backend
		o.Out, o.Overwrite = filepath.Join(*out, sub), true // the demo's own folders: each run replaces them
		r := newGenerateRunner(stderr)
		r.PinCores = pin
		start := time.Now()
		dirs, err := r.Run(ctx, o)
		return time.Since(start), dirs, err
	}
	type row struct {
		name    string
		k, core int // processes, and cores each may use (0: all)
		wall    time.Duration
		dirs    []string
		match   string
		speedup float64
	}
	var rows []row
	add := func(name string, k int, pin bool, sub string) error {
		wall, dirs, err := run(k, sub, pin)
		if err != nil {
			return err
		}
		r := row{name: name, k: k, wall: wall, dirs: dirs}
		if pin {
			r.core = 1
		}
		rows = append(rows, r)
		return nil
	}
	cores := runtime.NumCPU()
	if err := add(fmt.Sprintf("%d-stage pipeline", *nproc), *nproc, false, fmt.Sprintf("pipeline-%d", *nproc)); err != nil {
		return err
	}
	_, tasksetErr := exec.LookPath("taskset")
	pinned := *baseline && *perCore && *nproc > 1 && tasksetErr == nil
	if *baseline && *nproc > 1 {
		if err := add("one process", 1, false, "one-process"); err != nil {
			return err
		}
		rows[0].match = sameVideos(rows[0].dirs, rows[1].dirs)
		rows[0].speedup = rows[1].wall.Seconds() / rows[0].wall.Seconds()
		rows[1].speedup = 1
	}
	if pinned {
		if err := add(fmt.Sprintf("%d-stage pipeline, one core per stage", *nproc), *nproc, true, fmt.Sprintf("pipeline-%d-one-core-each", *nproc)); err != nil {
			return err
		}
		if err := add("one process on one core", 1, true, "one-process-one-core"); err != nil {
			return err
		}
		rows[2].match = sameVideos(rows[2].dirs, rows[1].dirs)
		rows[2].speedup = rows[3].wall.Seconds() / rows[2].wall.Seconds()
		rows[3].speedup = 1
	}
	fmt.Fprintf(stdout, "\n| run | processes | cores each | samples | wall (s) | s / sample | speedup | same bits as 1 process |\n")
	fmt.Fprintf(stdout, "|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		match, speedup, core := r.match, "-", "all"
		if match == "" {
			match = "-"
		}
		if r.speedup > 0 {
			speedup = fmt.Sprintf("%.2fx", r.speedup)
		}
		if r.core > 0 {
			core = strconv.Itoa(r.core)
		}
		fmt.Fprintf(stdout, "| %s | %d | %s | %d | %.1f | %.2f | %s | %s |\n", r.name, r.k, core, *samples,
			r.wall.Seconds(), r.wall.Seconds()/float64(*samples), speedup, match)
	}
	if len(rows) > 1 {
		fmt.Fprintf(stdout, "\nWhat the speedup means here (%d cores): the %d processes of the pipeline share the cores that one process already keeps busy, so %.2fx is what pipelining gains on one shared CPU, not per device.\n",
			cores, *nproc, rows[0].speedup)
	}
	switch {
	case pinned && *nproc > cores:
		fmt.Fprintf(stdout, "With one core per stage (%d stages on %d cores, so some share one), the pipeline runs %.2fx as fast as one process on one core; each stage would have its own device in a real deployment.\n",
			*nproc, cores, rows[2].speedup)
	case pinned:
		fmt.Fprintf(stdout, "With one core per stage, as each stage would have its own device, the %d-stage pipeline runs %.2fx as fast as one process on one core (at most %dx: the last stage also decodes, and filling and draining the pipeline costs more with few samples).\n",
			*nproc, rows[2].speedup, *nproc)
	case *baseline && *nproc > 1 && *perCore:
		fmt.Fprintf(stdout, "(The one-core-per-stage runs need taskset (Linux): skipped.)\n")
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
