package main

import (
	"context"
	"io"

	"github.com/vdpp/vdpp/eval"
)

// runEval is `vdpp eval --model DIR|builtin --json FILE`: generate the held-out clips of the
// procedural dataset from their first frames and score them (PSNR, SSIM per frame) next to
// the repeat-the-first-frame and untrained-UNet baselines (eval.Command).
func runEval(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := eval.DefaultCommand()
	fs := newFlags("eval", stdout, stderr)
	c.RegisterFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	_, err := c.Run(ctx, stdout, stderr)
	return err
}
