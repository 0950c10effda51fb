package wan_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/internal/shared"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/lora"
	"github.com/vdpp/vdpp/model/wan"
	"github.com/vdpp/vdpp/model/wan/wantest"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/tensor"
)

// generateMesh runs a whole generation on the dev checkpoint over an in-process
// pp x cfg x cp x dp mesh and returns the frames of each sample, decoded by its recording
// rank.
func generateMesh(t *testing.T, dir string, in family.Input, p family.Params, pp, cfg, cp, dp, samples int) map[int64]*tensor.Dense {
	t.Helper()
	frames, _ := generateMeshLogs(t, dir, in, p, pp, cfg, cp, dp, samples)
	return frames
}

// generateMeshLogs is generateMesh that also returns each sample's step cache records
// (p.Cache), as its recording rank holds them.
func generateMeshLogs(t *testing.T, dir string, in family.Input, p family.Params, pp, cfg, cp, dp, samples int) (map[int64]*tensor.Dense, map[int64][]pipeline.CacheRecord) {
	t.Helper()
	world := pp * cfg * cp * dp
	mesh, err := comm.NewMesh(pp, cfg, cp, dp, world)
	if err != nil {
		t.Fatal(err)
	}
	r, err := family.ResolveDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := r.StagePlan(p.Steps, pp, nil)
	if err != nil {
		t.Fatal(err)
	}
	trs := comm.NewLocal(world, comm.Options{RecvTimeout: 60 * time.Second})
	frames, mu := map[int64]*tensor.Dense{}, &sync.Mutex{}
	logs := map[int64][]pipeline.CacheRecord{}
	errs := make([]error, world)
	var wg sync.WaitGroup
	for rank := range world {
		wg.Go(func() {
			errs[rank] = func() error {
				defer trs[rank].Close()
				place, err := pipeline.Place(mesh, trs[rank])
				if err != nil {
					return err
				}
				k := place.Stage
				roles := family.Roles{Condition: k == 0, Denoise: true, Decode: k == pp-1 && place.Records,
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
				var wl pipeline.Workload = &frameWorkload{s: s, in: in, p: p, sc: sc, mu: mu, frames: frames, logs: logs}
				if !roles.Decode {
					wl = discardFinish{wl}
				}
				return pipeline.Run(context.Background(), pipeline.Config{
					Plan: plan, Stage: k, PrevRank: place.PrevRank, NextRank: place.NextRank, TotalSteps: p.Steps,
					NumSamples: samples, MicroBatch: 1, Replica: place.Replica, Replicas: place.Replicas,
					Transport: trs[rank], Stepper: st, Workload: wl,
				})
			}()
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return frames, logs
}

// discardFinish is the workload of a rank that holds a finished latent without reporting
// it (the other cfg and cp members of the last stage).
type discardFinish struct{ pipeline.Workload }

func (discardFinish) Finish(context.Context, *pipeline.Item) error { return nil }

// CFG-parallel, pipeline and data-parallel meshes give frames bit-identical to one rank on
// the dev checkpoint (guidance_scale for the high-noise expert, guidance_scale_2 for the
// low-noise one); context-parallel meshes (Ulysses over the token sequence) within 1e-5.
func TestMeshesMatchOneRank(t *testing.T) {
	dir := shared.Require(t, "golden", "wan-dev")
	in := devEmbeddings(t, dir)
	p := family.Params{NumFrames: 9, Steps: 4, Height: 64, Width: 64, GuidanceScale: 4, GuidanceScale2: 3, Seed: 5}
	const samples = 2
	want := generateMesh(t, dir, in, p, 1, 1, 1, 1, samples)
	for _, m := range []struct {
		pp, cfg, cp, dp int
		exact           bool
	}{
		{1, 2, 1, 1, true},
		{2, 2, 1, 1, true},
		{1, 1, 1, 2, true},
		{1, 1, 2, 1, false},
		{1, 2, 2, 1, false},
	} {
		t.Run(fmt.Sprintf("pp%d_cfg%d_cp%d_dp%d", m.pp, m.cfg, m.cp, m.dp), func(t *testing.T) {
			n := m.dp // one sample per replica keeps the test fast
			got := generateMesh(t, dir, in, p, m.pp, m.cfg, m.cp, m.dp, n)
			if len(got) != n {
				t.Fatalf("%d samples, want %d", len(got), n)
			}
			for s, f := range want {
				if s >= int64(n) {
					continue
				}
				rel := tensor.RelL2(got[s], f)
				switch {
				case m.exact && !tensor.BitEqual(got[s], f):
					t.Errorf("sample %d differs from one rank (rel L2 %.3g)", s, rel)
				case !m.exact && rel > 1e-5:
					t.Errorf("sample %d: rel L2 %.3g vs one rank > 1e-5", s, rel)
				default:
					t.Logf("sample %d: rel L2 %.3g vs one rank", s, rel)
				}
			}
		})
	}
}

// Every sampler a Wan model offers gives bit-identical frames on pp2, cfg2 and pp2 x cfg2
// as on one rank: a multistep solver's history and the LCM sampler's noise keys travel in
// the hand-off, and the noise is drawn by (seed, sample, step), not by rank. The dev
// checkpoint has two experts, which the schedules switch at different steps.
func TestSchedulersMeshesMatchOneRank(t *testing.T) {
	dir := shared.Require(t, "golden", "wan-dev")
	in := devEmbeddings(t, dir)
	loras := filepath.Join("..", "lora", "testdata")
	for _, name := range []string{"unipc", "euler", "dpm++2m", "lcm", "lcm+lora"} {
		t.Run(name, func(t *testing.T) {
			p := family.Params{NumFrames: 5, Steps: 4, Height: 32, Width: 32, GuidanceScale: 4, Seed: 3,
				SchedulerChoice: family.SchedulerChoice{Scheduler: strings.TrimSuffix(name, "+lora"), FlowShift: 5}}
			if strings.HasSuffix(name, "+lora") {
				// The distilled recipe: a LoRA of lightx2v's key set on both experts and one
				// more on the second, merged as each stage loads its expert, unguided.
				distill := filepath.Join(t.TempDir(), "distill.safetensors")
				f, err := wan.Open(dir)
				if err != nil {
					t.Fatal(err)
				}
				cfg, err := f.TransformerConfig(1)
				if err != nil {
					t.Fatal(err)
				}
				if err := wantest.WriteDistillLoRA(distill, cfg, 4, 2); err != nil {
					t.Fatal(err)
				}
				p.GuidanceScale = 1
				p.LoRAs = family.LoRAs{LoRA: []lora.Spec{{Path: distill, Strength: 1}},
					LoRA2: []lora.Spec{{Path: distill, Strength: 1}, {Path: filepath.Join(loras, "lora_wan_expert2", "lora0.safetensors"), Strength: 0.5}}}
			}
			want := generateMesh(t, dir, in, p, 1, 1, 1, 1, 1)
			other := p
			other.Seed = 4
			if tensor.BitEqual(generateMesh(t, dir, in, other, 1, 1, 1, 1, 1)[0], want[0]) {
				t.Fatal("seeds 3 and 4 give the same frames")
			}
			for _, m := range [][2]int{{2, 1}, {1, 2}, {2, 2}} {
				if m[1] == 2 && p.GuidanceScale <= 1 {
					continue // an unguided run has no CFG halves to split
				}
				got := generateMesh(t, dir, in, p, m[0], m[1], 1, 1, 1)
				if !tensor.BitEqual(got[0], want[0]) {
					t.Errorf("pp%d x cfg%d differs from one rank (rel L2 %.3g)", m[0], m[1], tensor.RelL2(got[0], want[0]))
				}
			}
		})
	}
}
