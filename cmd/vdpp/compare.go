package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/vdpp/vdpp/eval"
)

// runCompare is `vdpp compare A.json B.json`: a clip-by-clip comparison of two `vdpp eval`
// reports on the same clips (mean difference B − A, its standard error, and on how many
// clips B scores higher), the A/B test of two models or two sampling settings.
func runCompare(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("compare", stdout, stderr)
	if err := parseFlagsAndArgs(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return fmt.Errorf("%w: compare takes two eval reports (A.json B.json), got %d arguments", errUsage, fs.NArg())
	}
	var reps [2]eval.Report
	for i, path := range fs.Args() {
		r, err := eval.ReadReport(path)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		reps[i] = r
	}
	c, err := eval.Compare(reps[0], reps[1])
	if errors.Is(err, eval.ErrIncomparable) {
		return fmt.Errorf("%w: %s vs %s: %w", errUsage, fs.Arg(0), fs.Arg(1), err)
	}
	if err != nil {
		return err
	}
	return c.Write(stdout)
}
