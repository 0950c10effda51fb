package main

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/plan"
)

// runCalibrateWorker is the hidden `vdpp worker calibrate` job that `vdpp plan` and
// `vdpp bench --plan auto` launch: every rank times an all-gather over the whole world (and
// a hand-off in a world of two); rank 0 writes the result to --out.
func runCalibrateWorker(ctx context.Context, args []string, stderr io.Writer, env comm.Env, log *slog.Logger) (err error) {
	fs := newFlags("worker calibrate", stderr, stderr)
	bytes := fs.Int64("bytes", 4, "bytes each member contributes to the all-gather (and of the hand-off)")
	repeats := fs.Int("repeats", 50, "timed repetitions")
	gap := fs.Duration("gap", 2*time.Millisecond, "idle pause before each timed collective")
	out := fs.String("out", "", "result file (rank 0)")
	timeout := fs.Duration("timeout", 60*time.Second, "connect and receive timeout")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	tr, err := comm.Dial(ctx, env, comm.Options{RecvTimeout: *timeout, ConnectTimeout: *timeout, Logger: log})
	if err != nil {
		return err
	}
	defer func() { comm.CloseWith(tr, err) }()
	res, err := (&plan.Calibrator{Repeats: *repeats, Gap: *gap}).GroupWorker(ctx, tr, *bytes)
	if err != nil {
		return err
	}
	if env.Rank != 0 || *out == "" {
		return nil
	}
	return plan.WriteGroupResult(*out, res)
}
