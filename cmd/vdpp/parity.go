package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/model/svd/parity"
	"github.com/vdpp/vdpp/model/wan"
	wanparity "github.com/vdpp/vdpp/model/wan/parity"
)

// parityReport is what both families' parity runs return.
type parityReport interface {
	Table() string
	WriteJSON(path string) error
	Err() error
}

// runParity is `vdpp parity --golden DIR [--json FILE] [--backend B]`: run every golden case
// of the folder's family (SVD, or Wan when model_index.json names a Wan pipeline) and exit
// non-zero when any tensor is outside tolerance or (Wan) has no runner to check it.
func runParity(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("parity", stdout, stderr)
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
	progress := func(name string) {
		fmt.Fprintf(stderr, "parity: case %s (%.1fs)\n", name, time.Since(start).Seconds())
	}
	// The family comes from model_index.json's _class_name.
	isWan, err := wan.IsWanIndex(*golden)
	if err != nil {
		return err
	}
	var rep parityReport
	count := 0
	if isWan {
		r, err := wanparity.Run(ctx, *golden, b, progress)
		if err != nil {
			return err
		}
		rep, count = r, r.Checked()
	} else {
		r, err := parity.Run(ctx, *golden, b, progress)
		if err != nil {
			return err
		}
		rep, count = r, len(r.Results)
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
	fmt.Fprintf(stdout, "all %d tensors within tolerance (%.1fs)\n", count, time.Since(start).Seconds())
	return nil
}
