package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"golang.org/x/term"

	"github.com/vdpp/vdpp/generate"
)

// runGenerate is `vdpp generate --model DIR --image FILE [...]`.
func runGenerate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o := generate.DefaultOptions()
	fs := flag.NewFlagSet("generate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o.RegisterFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	env, launched, err := launchedRank()
	if err != nil {
		return err
	}
	if launched {
		// One rank of a launched job: --nproc left out is the world size; the last stage
		// writes the samples and prints their folders.
		if !flagGiven(fs, "nproc") {
			o.NProc = 0
		}
		dirs, _, err := generate.RunLaunched(ctx, o, args, env, newLogger(stderr).With("rank", env.Rank))
		for _, d := range dirs {
			fmt.Fprintln(stdout, d)
		}
		return err
	}
	r := &generate.Runner{Log: newLogger(stderr), Progress: stderr, Terminal: term.IsTerminal(int(os.Stderr.Fd()))}
	dirs, err := r.Run(ctx, o)
	for _, d := range dirs {
		fmt.Fprintln(stdout, d)
	}
	return err
}
