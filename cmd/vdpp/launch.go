package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/vdpp/vdpp/comm"
)

// runLaunch starts --nproc-per-node workers of this same binary, torchrun style:
//
//	vdpp launch --nproc-per-node K [--nnodes N --node-rank R --master-addr A --master-port P] -- SUBCOMMAND ...
//
// Each worker runs `vdpp SUBCOMMAND ...` with RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT set; its output lines are prefixed
// "[rank N] ". When one worker fails the others are stopped and the error names it.
func runLaunch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("launch", stdout, stderr)
	o := comm.LaunchOptions{Stdout: stdout, Stderr: stderr}
	fs.IntVar(&o.NProcPerNode, "nproc-per-node", 1, "worker processes on this node")
	fs.IntVar(&o.NNodes, "nnodes", 1, "nodes in the job")
	fs.IntVar(&o.NodeRank, "node-rank", 0, "index of this node, 0..nnodes-1")
	fs.StringVar(&o.MasterAddr, "master-addr", "127.0.0.1", "host of rank 0 (the rendezvous store)")
	fs.IntVar(&o.MasterPort, "master-port", 0, "rendezvous port (0: pick a free one; required with --nnodes > 1)")
	fs.DurationVar(&o.GracePeriod, "grace", comm.DefaultGracePeriod, "time between SIGTERM and SIGKILL when stopping workers")
	if err := parseFlagsAndArgs(fs, args); err != nil {
		return err
	}
	o.Command = fs.Args()
	if len(o.Command) == 0 {
		return fmt.Errorf("%w: no worker command (vdpp launch [flags] -- SUBCOMMAND ...)", errUsage)
	}
	if o.Command[0] == "launch" {
		return fmt.Errorf("%w: a launched worker may not launch again", errUsage)
	}
	switch {
	case o.NProcPerNode < 1:
		return fmt.Errorf("%w: --nproc-per-node %d < 1", errUsage, o.NProcPerNode)
	case o.NNodes < 1:
		return fmt.Errorf("%w: --nnodes %d < 1", errUsage, o.NNodes)
	case o.NodeRank < 0 || o.NodeRank >= o.NNodes:
		return fmt.Errorf("%w: --node-rank %d out of range for --nnodes %d", errUsage, o.NodeRank, o.NNodes)
	case o.NNodes > 1 && o.MasterPort == 0:
		return fmt.Errorf("%w: --master-port is required with --nnodes %d", errUsage, o.NNodes)
	case o.GracePeriod <= 0:
		o.GracePeriod = time.Millisecond
	}
	return comm.Launch(ctx, o)
}

// launchedRank says whether this process is one rank of a world a launcher started (vdpp
// launch, torchrun, LeaderWorkerSet: a world of more than one), and where it sits. A
// command that sees one acts as that rank of one job instead of starting its own workers.
func launchedRank() (comm.Env, bool, error) {
	env, err := comm.EnvFromOS(os.Getenv)
	if err != nil {
		return env, false, err
	}
	return env, env.WorldSize > 1, nil
}
