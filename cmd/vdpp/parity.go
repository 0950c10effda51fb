package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/model/svd/parity"
)

// runParity is `vdpp parity --golden DIR [--json FILE] [--backend B]`: run every golden case
// and exit non-zero when any tensor is outside tolerance.
func runParity(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("parity", flag.ContinueOnError)
	fs.SetOutput(stderr)
	golden := fs.String("golden", "", "folder with a diffusers checkpoint and cases/<case>/{inputs,outputs}.safetensors")
	jsonOut := fs.String("json", "", "write the results as JSON to this file")
	backend := fs.String("backend", "", "GoMLX backend (default: GOMLX_BACKEND or go)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *golden == "" {
		return fmt.Errorf("%w: --golden DIR is required", errUsage)
	}
	b, err := nn.NewBackend(*backend)
	if err != nil {
		return err
	}
	start := time.Now()
	rep, err := parity.Run(ctx, *golden, b, func(name string) {
		fmt.Fprintf(stderr, "parity: case %s (%.1fs)\n", name, time.Since(start).Seconds())
	})
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, rep.Table())
	if *jsonOut != "" {
		if err := rep.WriteJSON(*jsonOut); err != nil {
			return err
		}
	}
	if err := rep.Err(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "all %d tensors within tolerance (%.1fs)\n", len(rep.Results), time.Since(start).Seconds())
	return nil
}
