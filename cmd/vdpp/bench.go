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
	r := &bench.Runner{Log: newLogger(stderr)}
	rep, err := r.Run(ctx, o)
	if err != nil {
		return err
	}
	return bench.WriteMarkdown(stdout, rep)
}
