package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"github.com/vdpp/vdpp/bench"
	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/internal/atomicfile"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/train"
)

// runTrain is `vdpp train --dir DIR --phase vae|unet --steps N [--resume] [--export OUT]`:
// train the built-in model's VAE or UNet on the procedural dataset, checkpointing into DIR;
// with --export, write the diffusers folder of DIR's latest checkpoints to OUT afterwards.
// With --nproc N it starts N processes of itself that train data-parallel; a process
// started by `vdpp launch`, torchrun or LeaderWorkerSet (their variables set, world > 1) is
// one rank of such a run.
func runTrain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := train.DefaultCommand()
	fs := newFlags("train", stdout, stderr)
	c.RegisterFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if c.Bench && !fs.Given("nproc") {
		c.NProc = 2
	}
	c, err := c.Resolve(fs.Given("phase"))
	if err != nil {
		return err
	}
	switch {
	case c.Bench:
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		rep, err := bench.Train(ctx, exe, c, "vdpp train "+strings.Join(args, " "), stderr)
		if err != nil {
			return err
		}
		bench.WriteTrainReport(stdout, rep)
		if c.JSON != "" {
			return atomicfile.WriteJSON(c.JSON, rep)
		}
		return nil
	case c.ExportOnly:
		if err := c.ExportFolder(); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "exported %s\n", c.Export)
		return nil
	}
	env, err := comm.EnvFromOS(os.Getenv)
	if err != nil {
		return err
	}
	if env.WorldSize == 1 && c.NProc > 1 {
		return c.Launch(ctx, args, stderr)
	}
	if env.WorldSize > 1 && c.NProc > 1 && c.NProc != env.LocalWorldSize {
		return fmt.Errorf("%w: --nproc %d, but the launcher started %d processes on this node", errUsage, c.NProc, env.LocalWorldSize)
	}
	b, err := nn.NewBackend(c.Backend)
	if err != nil {
		return err
	}
	c.Progress = stderr
	if f, ok := stderr.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			c.Terminal = true
		}
	}
	var res train.Result
	if env.WorldSize > 1 {
		res, err = c.RunLaunched(ctx, b, env)
	} else {
		res, err = train.Run(ctx, b, c.Options)
	}
	if err != nil || env.Rank != 0 {
		return err
	}
	if c.JSON != "" {
		if err := atomicfile.WriteJSON(c.JSON, train.NewReport(res, c.Options, runtime.GOMAXPROCS(0))); err != nil {
			return err
		}
	}
	train.WriteSummary(stdout, res, c.Options)
	if c.Export != "" {
		if err := c.ExportFolder(); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "exported %s\n", c.Export)
	}
	return nil
}
