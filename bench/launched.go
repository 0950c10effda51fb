package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/internal/cacheflag"
	"github.com/vdpp/vdpp/internal/cli"
	"github.com/vdpp/vdpp/tensor"
)

// RunRank runs `vdpp bench` as one rank of a world that a launcher started (vdpp launch,
// torchrun, Slurm through them, LeaderWorkerSet): env says where this process sits, and
// args is the command line every rank was given. Rank 0 resolves the options (--nproc
// defaults to the world size) and shares them, so every rank runs the same mesh; each rank
// runs its stage; rank 0 then gathers every rank's timeline and final latents over the
// transport, runs the one-rank baseline and writes the outputs. Only rank 0 returns a
// report (owner true); the others return once their results are handed over.
func RunRank(ctx context.Context, o Options, args []string, env comm.Env, log *slog.Logger) (rep Report, owner bool, err error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if o.Plan != "" {
		return Report{}, false, fmt.Errorf("bench: --plan %s in a launched world: give the mesh (--pp --cfg --cp --dp; vdpp plan ranks them)", o.Plan)
	}
	wallStart := time.Now()
	tr, err := dial(ctx, o, env, log)
	if err != nil {
		return Report{}, false, err
	}
	// A rank that fails ends the job on every rank at once, naming itself.
	defer func() { comm.CloseWith(tr, err) }()
	resolved, err := comm.AgreeArgs(ctx, tr.Store(), env.Rank, "bench", args, func() ([]string, error) {
		if o.NProc == 0 && o.PP+o.CFG+o.CP+o.DP == 0 {
			o.NProc = env.WorldSize
		}
		if err := o.Check(); err != nil {
			return nil, err
		}
		r, err := o.Resolve()
		if err != nil {
			return nil, err
		}
		if r, err = r.ResolveMesh(); err != nil {
			return nil, err
		}
		if err := r.Validate(); err != nil {
			return nil, err
		}
		return r.WorkerArgs(), nil
	})
	if err != nil {
		return Report{}, false, err
	}
	own := o
	if o, err = parseWorkerArgs(resolved); err != nil {
		return Report{}, false, err
	}
	// What only the owner does is not among the workers' arguments: it comes from this
	// rank's command line, which every rank shares.
	o.JSON, o.Trace, o.SVG, o.NoBaseline = own.JSON, own.Trace, own.SVG, own.NoBaseline
	run, err := runGathered(ctx, o, env, tr, log, "bench-results")
	if err != nil || env.Rank != 0 {
		return Report{}, false, err
	}
	var plain *meshRun
	if rule, err := o.Cache.Rule(); err == nil && rule.On() {
		// The same mesh without the cache, every rank again.
		uncached := o
		uncached.Cache = cacheflag.Default()
		r, err := runGathered(ctx, uncached, env, tr, log, "bench-results-uncached")
		if err != nil {
			return Report{}, false, fmt.Errorf("bench: uncached run: %w", err)
		}
		plain = &r
	}
	rep, err = report(ctx, o, run, plain, wallStart, log)
	return rep, true, err
}

// runGathered runs env.Rank's stage of o's mesh and hands its results to rank 0 over a
// group named name; rank 0 returns every rank's, the others an empty run once rank 0
// has them all.
func runGathered(ctx context.Context, o Options, env comm.Env, tr *comm.TCPTransport, log *slog.Logger, name string) (meshRun, error) {
	res, finals, err := runStage(ctx, o, env, tr, log)
	if err != nil {
		return meshRun{}, err
	}
	g, err := comm.NewNamedGroup(tr, name, allRanks(env.WorldSize))
	if err != nil {
		return meshRun{}, err
	}
	if env.Rank != 0 {
		m, err := resultMessage(res, finals)
		if err != nil {
			return meshRun{}, fmt.Errorf("rank %d: %w", env.Rank, err)
		}
		m.Tag = g.Tag()
		if err := tr.Send(ctx, 0, m); err != nil {
			return meshRun{}, fmt.Errorf("rank %d: hand results to rank 0: %w", env.Rank, err)
		}
		// Rank 0 says when it has them all: closing earlier could cut the hand-off short.
		return meshRun{}, comm.Barrier(ctx, g)
	}
	results := []rankResult{res}
	finalsByID := map[int64]*tensor.Dense{}
	for s, f := range finals {
		finalsByID[s] = f
	}
	for r := 1; r < env.WorldSize; r++ {
		m, err := tr.RecvTag(ctx, r, g.Tag())
		if err != nil {
			return meshRun{}, fmt.Errorf("rank 0: results of rank %d: %w", r, err)
		}
		rr, err := readResultMessage(m, finalsByID)
		if err != nil {
			return meshRun{}, fmt.Errorf("rank 0: results of rank %d: %w", r, err)
		}
		results = append(results, rr)
	}
	if err := comm.Barrier(ctx, g); err != nil {
		return meshRun{}, err
	}
	return meshRun{results: results, finals: finalsByID}, nil
}

// parseWorkerArgs reads options back from WorkerArgs.
func parseWorkerArgs(args []string) (Options, error) {
	o := DefaultOptions()
	fs := cli.New("bench", nil, nil)
	o.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return o, fmt.Errorf("bench: rank 0's options: %w", err)
	}
	return o, nil
}

func allRanks(n int) []int {
	r := make([]int, n)
	for i := range r {
		r[i] = i
	}
	return r
}

// resultMessage packs a rank's result (JSON) and its final latents, one after the other in
// FinalIDs order.
func resultMessage(res rankResult, finals map[int64]*tensor.Dense) (comm.Message, error) {
	b, err := json.Marshal(res)
	if err != nil {
		return comm.Message{}, err
	}
	per := tensor.NumElements(res.FinalShape)
	all := tensor.New(len(res.FinalIDs) * per)
	for i, s := range res.FinalIDs {
		f := finals[s]
		if f == nil || len(f.Data) != per {
			return comm.Message{}, fmt.Errorf("bench: no final latent of shape %v for sample %d", res.FinalShape, s)
		}
		copy(all.Data[i*per:], f.Data)
	}
	return comm.Message{Sample: int64(res.Rank), Tensors: []comm.NamedTensor{
		{Name: "result", Tensor: comm.BytesTensor(b)}, {Name: "finals", Tensor: all}}}, nil
}

// readResultMessage unpacks resultMessage, adding the final latents to finals.
func readResultMessage(m comm.Message, finals map[int64]*tensor.Dense) (rankResult, error) {
	var res rankResult
	b, err := comm.TensorBytes(m.Tensor("result"))
	if err != nil {
		return res, err
	}
	if err := json.Unmarshal(b, &res); err != nil {
		return res, err
	}
	all := m.Tensor("finals")
	per := tensor.NumElements(res.FinalShape)
	if all == nil || len(all.Data) != len(res.FinalIDs)*per {
		return res, fmt.Errorf("bench: final latents missing or of the wrong size")
	}
	for i, s := range res.FinalIDs {
		f := tensor.New(res.FinalShape...)
		copy(f.Data, all.Data[i*per:(i+1)*per])
		finals[s] = f
	}
	return res, nil
}
