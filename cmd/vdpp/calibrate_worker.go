package main

import (
	"context"
	"io"
	"log/slog"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/plan"
)

// runCalibrateWorker is the hidden `vdpp worker calibrate` job that `vdpp plan` and every
// --plan auto launch (plan.CalibrateWorker).
func runCalibrateWorker(ctx context.Context, args []string, stderr io.Writer, env comm.Env, log *slog.Logger) error {
	o := plan.DefaultCalibrateWorker()
	fs := newFlags("worker calibrate", stderr, stderr)
	o.RegisterFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	return o.Run(ctx, env, log)
}
