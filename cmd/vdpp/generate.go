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
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	r := &generate.Runner{Log: newLogger(stderr), Progress: stderr, Terminal: term.IsTerminal(int(os.Stderr.Fd()))}
	dirs, err := r.Run(ctx, o)
	for _, d := range dirs {
		fmt.Fprintln(stdout, d)
	}
	return err
}
