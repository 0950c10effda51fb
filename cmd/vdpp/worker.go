package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/vdpp/vdpp/bench"
	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/generate"
)

// runWorker runs one rank of a launched job: `vdpp worker JOB [flags]`, with the rank and
// world read from torchrun / LeaderWorkerSet variables.
func runWorker(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: vdpp worker JOB [flags] (jobs: bench, generate, calibrate, serve)", errUsage)
	}
	env, err := comm.EnvFromOS(os.Getenv)
	if err != nil {
		return err
	}
	log := newLogger(stderr).With("rank", env.Rank)
	switch args[0] {
	case "bench":
		o := bench.DefaultOptions()
		fs := newFlags("worker bench", stderr, io.Discard) // the parent said what is deprecated
		o.RegisterFlags(fs)
		if err := parseFlags(fs, args[1:]); err != nil {
			return err
		}
		return bench.RunWorker(ctx, o, env, log)
	case "generate":
		o := generate.DefaultOptions()
		fs := newFlags("worker generate", stderr, io.Discard)
		o.RegisterFlags(fs)
		if err := parseFlags(fs, args[1:]); err != nil {
			return err
		}
		return generate.RunRank(ctx, o, env, log)
	case "calibrate":
		return runCalibrateWorker(ctx, args[1:], stderr, env, log)
	case "serve":
		return runServeWorker(ctx, args[1:], stderr, env.Rank)
	default:
		return fmt.Errorf("%w: unknown worker job %q", errUsage, args[0])
	}
}
