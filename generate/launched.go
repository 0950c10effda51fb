package generate

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/internal/cli"
)

// RunLaunched runs `vdpp generate` as one rank of a world that a launcher started (vdpp
// launch, torchrun, Slurm through them, LeaderWorkerSet): env says where this process sits
// and args is the command line every rank was given. Rank 0 resolves the options (the
// model's defaults, the input; o.NProc 0 means the world size) and shares them, so every
// rank runs the same job as one stage; the last stage, which decodes, writes the samples
// and is the owner: it returns their folders (owner true), the other ranks none.
func RunLaunched(ctx context.Context, o Options, args []string, env comm.Env, log *slog.Logger) (dirs []string, owner bool, err error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t, err := dial(ctx, o, env, log)
	if err != nil {
		return nil, false, err
	}
	// A rank that fails ends the job on every rank at once, naming itself.
	defer func() { comm.CloseWith(t, err) }()
	resolved, err := comm.AgreeArgs(ctx, t.Store(), env.Rank, "generate", args, func() ([]string, error) {
		if o.NProc == 0 && o.PP+o.CFG+o.CP+o.DP == 0 {
			o.NProc = env.WorldSize
		}
		r, err := Resolve(o)
		if err != nil {
			return nil, err
		}
		if r.Plan == "auto" {
			return nil, badOptions("--plan auto in a launched world: give the mesh (--pp --cfg --cp --dp) that vdpp plan printed")
		}
		if r.NProc != env.WorldSize {
			return nil, badOptions("--nproc %d (mesh %s) but the launched world has %d ranks", r.NProc, r.mesh(), env.WorldSize)
		}
		// Rank 0 names the output folder (a fresh out/run-NNN without --out).
		if r, _, err = PrepareOut(r); err != nil {
			return nil, err
		}
		return r.WorkerArgs(), nil
	})
	if err != nil {
		return nil, false, err
	}
	o = DefaultOptions()
	fs := cli.New("generate", nil, nil)
	o.RegisterFlags(fs)
	if err := fs.Parse(resolved); err != nil {
		return nil, false, fmt.Errorf("generate: rank 0's options: %w", err)
	}
	if err := runRank(ctx, o, env, t, log); err != nil {
		return nil, false, err
	}
	if env.Rank != o.NProc-1 {
		return nil, false, nil
	}
	return finished(o), true, nil
}
