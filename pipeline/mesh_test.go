package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/model/synthetic"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/sched"
	"github.com/vdpp/vdpp/tensor"
)

type meshSpec struct {
	pp, cfg, cp, dp       int
	steps, samples, micro int
	frames                int
	cache                 pipeline.Cache
	sched                 string // a sampler of sched.KarrasSamplers ("": Euler)
}

// runMesh runs a whole mesh in this process over the in-process transport and returns the
// final latents reported by every recording rank, plus every last-stage rank's copy.
func runMesh(t *testing.T, ms meshSpec) (map[int64]*tensor.Dense, []map[int64]*tensor.Dense) {
	t.Helper()
	recorded, copies, _ := runMeshLogs(t, ms)
	return recorded, copies
}

// runMeshLogs is runMesh that also returns every last-stage rank's cache records.
func runMeshLogs(t *testing.T, ms meshSpec) (map[int64]*tensor.Dense, []map[int64]*tensor.Dense, []map[int64][]pipeline.CacheRecord) {
	t.Helper()
	world := ms.pp * ms.cfg * ms.cp * ms.dp
	mesh, err := comm.NewMesh(ms.pp, ms.cfg, ms.cp, ms.dp, world)
	if err != nil {
		t.Fatal(err)
	}
	plan, _ := pipeline.EvenStages(ms.steps, ms.pp)
	sc, err := sched.NewKarrasNamed(ms.sched, sched.DefaultSVDConfig(), ms.steps)
	if err != nil {
		t.Fatal(err)
	}
	trs := comm.NewLocal(world, comm.Options{RecvTimeout: 10 * time.Second})
	recorded := map[int64]*tensor.Dense{}
	copies := make([]map[int64]*tensor.Dense, world)
	logs := make([]map[int64][]pipeline.CacheRecord, world)
	var mu sync.Mutex
	errs := make([]error, world)
	var wg sync.WaitGroup
	for r := 0; r < world; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			defer trs[r].Close()
			place, err := pipeline.Place(mesh, trs[r])
			if err != nil {
				errs[r] = err
				return
			}
			d, _ := synthetic.New(model.Config{})
			st := &pipeline.Stepper{Model: d, Sched: sc}
			if err := place.Configure(st, ms.frames); err != nil {
				errs[r] = err
				return
			}
			w := &noiseWorkload{shape: []int{ms.frames, 2, 3, 3}, sigma: sc.InitSigma(), finals: map[int64]*tensor.Dense{},
				guidance: sched.GuidanceWeights(1, 3, ms.frames), cache: ms.cache, sched: sc}
			errs[r] = pipeline.Run(context.Background(), pipeline.Config{
				Plan: plan, Stage: place.Stage, PrevRank: place.PrevRank, NextRank: place.NextRank,
				TotalSteps: ms.steps, NumSamples: ms.samples, MicroBatch: ms.micro,
				Replica: place.Replica, Replicas: place.Replicas,
				Transport: trs[r], Stepper: st, Workload: w,
			})
			mu.Lock()
			defer mu.Unlock()
			copies[r], logs[r] = w.finals, w.logs
			if place.Records {
				for s, f := range w.finals {
					if _, dup := recorded[s]; dup {
						errs[r] = fmt.Errorf("sample %d recorded twice", s)
					}
					recorded[s] = f
				}
			}
		}(r)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return recorded, copies, logs
}

// Every mesh gives final latents bit-identical to the one-rank guided run.
func TestMeshesBitIdenticalToOneRank(t *testing.T) {
	tests := []meshSpec{
		{pp: 1, cfg: 2, cp: 1, dp: 1},
		{pp: 1, cfg: 1, cp: 2, dp: 1},
		{pp: 1, cfg: 1, cp: 3, dp: 1, frames: 5}, // frames not divisible by cp
		{pp: 1, cfg: 1, cp: 1, dp: 3},
		{pp: 2, cfg: 2, cp: 1, dp: 1},
		{pp: 1, cfg: 2, cp: 2, dp: 1},
		{pp: 2, cfg: 1, cp: 1, dp: 2},
		{pp: 2, cfg: 2, cp: 2, dp: 1},
		{pp: 2, cfg: 1, cp: 2, dp: 2, micro: 2},
	}
	for _, ms := range tests {
		if ms.frames == 0 {
			ms.frames = 4
		}
		ms.steps, ms.samples = 6, 5
		if ms.micro == 0 {
			ms.micro = 1
		}
		t.Run(fmt.Sprintf("pp%d_cfg%d_cp%d_dp%d", ms.pp, ms.cfg, ms.cp, ms.dp), func(t *testing.T) {
			base := ms
			base.pp, base.cfg, base.cp, base.dp = 1, 1, 1, 1
			want, _ := runMesh(t, base)
			got, copies := runMesh(t, ms)
			if len(got) != ms.samples {
				t.Fatalf("recorded %d samples, want %d", len(got), ms.samples)
			}
			for s := range want {
				if !tensor.BitEqual(got[s], want[s]) {
					t.Fatalf("sample %d differs from the one-rank run (rel L2 %g)", s, tensor.RelL2(got[s], want[s]))
				}
			}
			for r, c := range copies {
				for s, f := range c {
					if !tensor.BitEqual(f, want[s]) {
						t.Fatalf("rank %d's copy of sample %d differs", r, s)
					}
				}
			}
		})
	}
}

// Euler ancestral (noise keyed by sample and step) and DPM++ 2M (the previous x0 in the
// hand-off) give every mesh the one-rank bits too, micro-batches regrouped included.
func TestSchedulersMeshesBitIdentical(t *testing.T) {
	for _, name := range []string{sched.NameEulerAncestral, sched.NameDPM2MKarras} {
		for _, ms := range []meshSpec{{pp: 2, cfg: 1, cp: 1, dp: 1}, {pp: 1, cfg: 2, cp: 1, dp: 1}, {pp: 3, cfg: 2, cp: 1, dp: 1, micro: 2}, {pp: 1, cfg: 1, cp: 1, dp: 2}} {
			ms.frames, ms.steps, ms.samples, ms.sched = 4, 6, 3, name
			ms.micro = max(ms.micro, 1)
			t.Run(fmt.Sprintf("%s_pp%d_cfg%d_dp%d", name, ms.pp, ms.cfg, ms.dp), func(t *testing.T) {
				base := ms
				base.pp, base.cfg, base.cp, base.dp, base.micro = 1, 1, 1, 1, 1
				want, _ := runMesh(t, base)
				got, _ := runMesh(t, ms)
				for s := range want {
					if !tensor.BitEqual(got[s], want[s]) {
						t.Fatalf("sample %d differs from the one-rank run (rel L2 %g)", s, tensor.RelL2(got[s], want[s]))
					}
				}
			})
		}
	}
}

func TestMeshRejects(t *testing.T) {
	trs := comm.NewLocal(2, comm.Options{})
	defer trs[0].Close()
	defer trs[1].Close()
	mesh, _ := comm.NewMesh(1, 1, 1, 1, 1)
	if _, err := pipeline.Place(mesh, trs[0]); err == nil {
		t.Fatal("a 1-rank mesh on a 2-rank world was accepted")
	}
	if _, err := pipeline.FrameRanges(2, 3); err == nil {
		t.Fatal("3 cp ranks for 2 frames accepted")
	}
}
