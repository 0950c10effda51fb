// Package familytest runs a whole generation of a registered family's model over an
// in-process pp x cfg x cp x dp mesh, for the families' tests: every rank opens its share of
// the model through the family seam (model/family), the ranks talk over comm.NewLocal, and
// each sample's frames come back decoded by its recording rank, to compare with one rank's.
//
// Contract: Generate needs the model's family registered (import its package) and a folder
// it resolves; it loads the model once per rank, so it suits tiny checkpoints only. It
// returns the first rank error; it never calls testing functions, so a test decides what
// a difference means.
package familytest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/sched"
	"github.com/vdpp/vdpp/tensor"
)

// Mesh is a run's pp x cfg x cp x dp mesh (zero sizes count as 1).
type Mesh struct{ PP, CFG, CP, DP int }

func (m Mesh) sizes() (pp, cfg, cp, dp int) {
	return max(m.PP, 1), max(m.CFG, 1), max(m.CP, 1), max(m.DP, 1)
}

// String is "pp2_cfg1_cp1_dp1", a subtest's name.
func (m Mesh) String() string {
	pp, cfg, cp, dp := m.sizes()
	return fmt.Sprintf("pp%d_cfg%d_cp%d_dp%d", pp, cfg, cp, dp)
}

// Generate runs p on the model folder dir with input in, samples samples over mesh m, one
// sample per item, and returns each sample's frames.
func Generate(ctx context.Context, dir string, in family.Input, p family.Params, m Mesh, samples int) (map[int64]*tensor.Dense, error) {
	pp, cfg, cp, dp := m.sizes()
	world := pp * cfg * cp * dp
	mesh, err := comm.NewMesh(pp, cfg, cp, dp, world)
	if err != nil {
		return nil, err
	}
	r, err := family.ResolveDir(dir)
	if err != nil {
		return nil, err
	}
	plan, err := r.StagePlan(p.Steps, pp, nil)
	if err != nil {
		return nil, err
	}
	trs := comm.NewLocal(world, comm.Options{RecvTimeout: 60 * time.Second})
	out := &frames{m: map[int64]*tensor.Dense{}}
	errs := make([]error, world)
	var wg sync.WaitGroup
	for rank := range world {
		wg.Go(func() {
			defer trs[rank].Close()
			if err := runRank(ctx, r, plan, trs[rank], mesh, in, p, samples, out); err != nil {
				errs[rank] = fmt.Errorf("rank %d: %w", rank, err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out.m, nil
}

// runRank is one rank of Generate.
func runRank(ctx context.Context, r family.Resolved, plan []pipeline.Range, tr comm.Transport, mesh comm.Mesh, in family.Input, p family.Params, samples int, out *frames) error {
	place, err := pipeline.Place(mesh, tr)
	if err != nil {
		return err
	}
	k := place.Stage
	roles := family.Roles{Condition: k == 0, Denoise: true, Decode: k == len(plan)-1 && place.Records,
		Steps: plan[k], TotalSteps: p.Steps, Schedule: p.SchedulerChoice}
	s, err := r.Open(family.Options{Roles: roles, LoRAs: p.LoRAs})
	if err != nil {
		return err
	}
	defer s.Close()
	sc, err := s.Scheduler(p)
	if err != nil {
		return err
	}
	st, err := s.Stepper(sc)
	if err != nil {
		return err
	}
	if err := place.Configure(st, s.LatentShape(p)[0]); err != nil {
		return err
	}
	var wl pipeline.Workload = &workload{s: s, in: in, p: p, sc: sc, out: out}
	if !roles.Decode {
		wl = discardFinish{wl}
	}
	return pipeline.Run(ctx, pipeline.Config{
		Plan: plan, Stage: k, PrevRank: place.PrevRank, NextRank: place.NextRank, TotalSteps: p.Steps,
		NumSamples: samples, MicroBatch: 1, Replica: place.Replica, Replicas: place.Replicas,
		Transport: tr, Stepper: st, Workload: wl,
	})
}

// frames collects the decoded samples of every recording rank.
type frames struct {
	mu sync.Mutex
	m  map[int64]*tensor.Dense
}

// workload prepares samples with the family's sampler and decodes them on the last stage.
type workload struct {
	s   family.Sampler
	in  family.Input
	p   family.Params
	sc  sched.Scheduler
	out *frames
}

func (w *workload) Prepare(ctx context.Context, group int64, samples []int64) (*pipeline.Item, error) {
	it, err := w.s.Prepare(ctx, w.in, w.p, w.sc, samples)
	if err != nil {
		return nil, err
	}
	it.Group = group
	it.Cache = pipeline.NewItemCache(w.p.Cache, len(samples))
	return it, nil
}

func (w *workload) Finish(ctx context.Context, it *pipeline.Item) error {
	per := it.Latent.Len() / len(it.Samples)
	for r, s := range it.Samples {
		f, err := w.s.Decode(ctx, &tensor.Dense{Shape: it.Latent.Shape[1:], Data: it.Latent.Data[r*per : (r+1)*per]}, w.p)
		if err != nil {
			return err
		}
		w.out.mu.Lock()
		w.out.m[s] = f
		w.out.mu.Unlock()
	}
	return nil
}

// discardFinish is the workload of a rank that holds a finished latent without reporting
// it (the other cfg and cp members of the last stage).
type discardFinish struct{ pipeline.Workload }

func (discardFinish) Finish(context.Context, *pipeline.Item) error { return nil }
