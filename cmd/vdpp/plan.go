package main

import (
	"context"
	"io"

	"github.com/vdpp/vdpp/plan"
)

// runPlan is `vdpp plan`: predict every mesh of --devices devices and rank them
// (plan.Command).
func runPlan(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := plan.DefaultCommand()
	fs := newFlags("plan", stdout, stderr)
	c.RegisterFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	return c.Run(ctx, fs.Given, stdout, stderr)
}
