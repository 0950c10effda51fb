package main

import (
	"context"
	"fmt"
	"io"

	"github.com/vdpp/vdpp/data/procedural"
)

// runData is `vdpp data --out DIR [--split train|heldout] [--n N] [--seed S] [--format
// png|safetensors]`: write samples of the procedural dataset and a contact sheet.
func runData(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("data", stdout, stderr)
	out := fs.String("out", "out/data", "output folder")
	split := fs.String("split", "heldout", "train or heldout")
	n := fs.Int("num-samples", 16, "number of samples")
	fs.Alias("n", "num-samples")
	seed := fs.Uint64("seed", 1, "dataset seed")
	rule := procedural.DefaultRule
	fs.Var(&rule, "rule", procedural.RuleUsage)
	format := fs.String("format", "png", "png (a folder of frames per sample) or safetensors (one [N,T,3,H,W] tensor in [-1,1])")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	sp, err := procedural.ParseSplit(*split)
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if *n < 1 {
		return fmt.Errorf("%w: --n must be positive", errUsage)
	}
	paths, err := procedural.Write(*out, procedural.ConfigFor(rule), *seed, sp, *n, procedural.Format(*format))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %d %s samples (seed %d) to %s; contact sheet %s\n", *n, sp, *seed, *out, paths[len(paths)-1])
	return nil
}
