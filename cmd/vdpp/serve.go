package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/generate"
	"github.com/vdpp/vdpp/serve"
	"github.com/vdpp/vdpp/serve/wire"
)

// runServe is `vdpp serve`: the HTTP job server with K worker processes.
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o := serve.DefaultOptions()
	fs := newFlags("serve", stdout, stderr)
	o.RegisterFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := o.Config(os.Getenv)
	if err != nil {
		return err
	}
	spec, err := serve.ResolveModelSpec(o.Model)
	if err != nil {
		return err
	}
	spec.StepMS, spec.Cost, spec.Variant, spec.Backend = cfg.Spec.StepMS, cfg.Spec.Cost, cfg.Spec.Variant, cfg.Spec.Backend
	spec.Weights, spec.LoRADir = cfg.Spec.Weights, cfg.Spec.LoRADir
	log := newLogger(stderr)
	spec.LoadProgress = generate.LoadProgress(log) // the text encoder's multi-GB load
	cfg.Spec, cfg.Log = spec, log
	env, launched, err := launchedRank()
	if err != nil {
		return err
	}
	if launched {
		// One rank of a launched server: rank 0 is the coordinator (HTTP, the job store),
		// every other rank a worker that connects to it at MASTER_ADDR:MASTER_PORT.
		if o.AutoMesh() {
			return fmt.Errorf("%w: --plan auto in a launched world: give the --pp and --dp that vdpp plan printed", errUsage)
		}
		secret, err := serve.SharedSecret(os.Getenv)
		if err != nil {
			return err
		}
		if env.Rank > 0 {
			log = log.With("rank", env.Rank-1)
			log.Info("serving as a worker", "coordinator", env.MasterHostPort())
			return serve.RunRemoteWorker(ctx, serve.WorkerConfig{Addr: env.MasterHostPort(), Rank: env.Rank - 1, Secret: secret,
				Spec: spec, HeartbeatTimeout: cfg.HeartbeatTimeout, Log: log})
		}
		if o.MeshGiven() && cfg.NProc != env.WorldSize-1 {
			return fmt.Errorf("%w: the mesh %v has %d worker ranks, but a launched world of %d ranks has %d workers (rank 0 coordinates)", errUsage, cfg.Mesh, cfg.NProc, env.WorldSize, env.WorldSize-1)
		}
		if !o.MeshGiven() {
			cfg.NProc, cfg.Mesh = env.WorldSize-1, comm.Mesh{PP: env.WorldSize - 1, CFG: 1, CP: 1, DP: 1}
		}
		cfg.Launcher, cfg.Secret = serve.RemoteLauncher{}, secret
		cfg.WorkerListen = env.ListenAddr()
	}
	cfg.WorkerOutput = stderr
	if o.AutoMesh() {
		if cfg.Mesh, err = serve.AutoMesh(ctx, o.Model, cfg, o.Goal, log); err != nil {
			return err
		}
	}
	if o.InProcess {
		cfg.Launcher = serve.InProcLauncher{Spec: spec, Log: log}
	}
	srv, err := serve.New(cfg)
	if err != nil {
		return err
	}
	if err := srv.Start(); err != nil {
		srv.Close()
		return err
	}
	fmt.Fprintf(stdout, "listening on http://%s\n", srv.Addr())
	log.Info("serving", "model", spec.Name, "dir", spec.Dir, "nproc", cfg.NProc, "mesh", cfg.Mesh.String(), "data_dir", cfg.DataDir, "keep_jobs", cfg.KeepJobs)
	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case err = <-srv.Err():
	}
	if cerr := srv.Close(); err == nil {
		err = cerr
	}
	return err
}

// runServeWorker is `vdpp worker serve`: one worker rank of a server (started by it).
func runServeWorker(ctx context.Context, args []string, stderr io.Writer, rank int) error {
	o := serve.DefaultWorkerOptions()
	o.Rank = rank
	fs := newFlags("worker serve", stderr, stderr)
	o.RegisterFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	secret, err := serve.SharedSecret(os.Getenv)
	if err != nil {
		return fmt.Errorf("worker serve: $%s must hold the server's secret", wire.SecretEnv)
	}
	return serve.RunWorker(ctx, serve.WorkerConfig{Addr: o.Connect, Rank: o.Rank, Secret: secret, Spec: o.Spec(),
		HeartbeatTimeout: o.HeartbeatTimeout, Log: newLogger(stderr).With("rank", o.Rank)})
}
