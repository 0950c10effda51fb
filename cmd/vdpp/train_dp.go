package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"time"

	"github.com/gomlx/gomlx/backends"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/train"
)

// launchTrain runs `vdpp train ARGS` as nproc local processes (comm.Launch: torchrun's
// variables, output lines prefixed "[rank N] ", the others stopped when one fails), each in
// a session of its own with ownSessions. Each gets GOMAXPROCS = cores/nproc unless the
// environment sets GOMAXPROCS.
func launchTrain(ctx context.Context, nproc int, ownSessions bool, args []string, out io.Writer) error {
	env := os.Environ()
	if os.Getenv("GOMAXPROCS") == "" {
		env = append(env, "GOMAXPROCS="+strconv.Itoa(max(1, runtime.NumCPU()/nproc)))
	}
	return comm.Launch(ctx, comm.LaunchOptions{NProcPerNode: nproc, NNodes: 1, Command: append([]string{"train"}, args...),
		Env: env, Stdout: out, Stderr: out, OwnSessions: ownSessions})
}

// trainRank joins the launched world described by env and trains as its rank env.Rank.
// comm's heartbeats end every rank's collectives within heartbeat when a rank dies, stops
// or is cut off, naming it; a failing rank ends the job for the others at once.
func trainRank(ctx context.Context, b backends.Backend, o train.Options, env comm.Env, timeout, heartbeat time.Duration) (train.Result, error) {
	tr, err := comm.Dial(ctx, env, comm.Options{RecvTimeout: timeout, HeartbeatTimeout: heartbeat})
	if err != nil {
		return train.Result{}, err
	}
	ranks := make([]int, env.WorldSize)
	for i := range ranks {
		ranks[i] = i
	}
	g, err := comm.NewNamedGroup(tr, "train", ranks)
	if err != nil {
		comm.CloseWith(tr, err)
		return train.Result{}, err
	}
	peers := train.GroupPeers(tr, g)
	res, err := train.RunRank(ctx, b, o, peers)
	if err == nil {
		// Every rank is past its last collective before any closes its links.
		err = peers.Barrier(context.WithoutCancel(ctx))
	}
	comm.CloseWith(tr, err)
	return res, err
}

// readConfigs reads a train.Configs JSON file (the keys UNet, VAE, CLIP, Scheduler,
// Features, Index and Sampling; an absent component keeps the built-in model's).
func readConfigs(path string) (train.Configs, error) {
	cfg := train.TinyConfigs()
	data, err := os.ReadFile(path)
	if err != nil {
		return cfg, err
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return cfg, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// printRankTimes prints the step rate and, for a data-parallel run, where each rank's
// time went.
func printRankTimes(w io.Writer, res train.Result, batch int) {
	if sps := res.StepsPerSecond(); sps > 0 {
		fmt.Fprintf(w, "%d process(es): %.3f steps/s, %.2f clips/s (steady, after the first step)\n", res.Ranks, sps, sps*float64(batch))
	}
	if len(res.Times) < 2 {
		return
	}
	fmt.Fprintf(w, "%-5s %10s %10s %10s %12s %10s %10s\n", "rank", "compute_s", "data_s", "wait_s", "allreduce_s", "apply_s", "cpu_s")
	for _, t := range res.Times {
		fmt.Fprintf(w, "%-5d %10.2f %10.2f %10.2f %12.2f %10.2f %10.2f\n", t.Rank, t.Compute, t.Data, t.Wait, t.AllReduce, t.Apply, t.CPU)
	}
}
