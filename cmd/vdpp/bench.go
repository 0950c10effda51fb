package main

import (
	"context"
	"io"

	"github.com/vdpp/vdpp/bench"
)

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o := bench.DefaultOptions()
	fs := newFlags("bench", stdout, stderr)
	o.RegisterFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	env, launched, err := launchedRank()
	if err != nil {
		return err
	}
	var rep bench.Report
	if launched {
		// One rank of a launched job: rank 0 writes the report.
		var owner bool
		rep, owner, err = bench.RunRank(ctx, o, args, env, newLogger(stderr).With("rank", env.Rank))
		if err != nil || !owner {
			return err
		}
	} else if rep, err = (&bench.Runner{Log: newLogger(stderr)}).Run(ctx, o); err != nil {
		return err
	}
	return bench.WriteMarkdown(stdout, rep)
}
