package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"golang.org/x/term"

	"github.com/vdpp/vdpp/generate"
)

// runGenerate is `vdpp generate --model DIR --image FILE [...]`.
func runGenerate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o := generate.DefaultOptions()
	fs := newFlags("generate", stdout, stderr)
	o.RegisterFlags(fs)
	// --from-report FILE: the report's job first, the command line's flags over it.
	args, err := generate.ExpandFromReport(args)
	if err != nil {
		return err
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if !fs.Given("nproc") && o.PP+o.CFG+o.CP+o.DP > 0 {
		o.NProc = 0 // the mesh's product
	}
	env, launched, err := launchedRank()
	if err != nil {
		return err
	}
	if launched {
		// One rank of a launched job: --nproc left out is the world size (or the mesh's
		// product); the last stage writes the samples and prints their folders.
		if !fs.Given("nproc") {
			o.NProc = 0
		}
		dirs, _, err := generate.RunLaunched(ctx, o, args, env, newLogger(stderr).With("rank", env.Rank))
		for _, d := range dirs {
			fmt.Fprintln(stdout, d)
		}
		return err
	}
	r := newGenerateRunner(stderr)
	dirs, err := r.Run(ctx, o)
	for _, d := range dirs {
		fmt.Fprintln(stdout, d)
	}
	return err
}

// newGenerateRunner is a generate.Runner logging and drawing progress on stderr (a bar as
// wide as the terminal when stderr is one).
func newGenerateRunner(stderr io.Writer) *generate.Runner {
	r := &generate.Runner{Log: newLogger(stderr), Progress: stderr}
	if f, ok := stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		r.Terminal = true
		if w, _, err := term.GetSize(int(f.Fd())); err == nil {
			r.Width = w
		}
	}
	return r
}
