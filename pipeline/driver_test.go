package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
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

// noiseWorkload makes seeded noise and records finished latents.
type noiseWorkload struct {
	shape    []int
	sigma    float32
	guidance []float32
	mu       sync.Mutex
	finals   map[int64]*tensor.Dense
	order    []int64
	// cache is the items' step cache rule; logs each finished sample's cache records.
	cache pipeline.Cache
	logs  map[int64][]pipeline.CacheRecord
	// sched, when set, gives each item its initial scheduler state (noise keys).
	sched sched.Scheduler
}

func (w *noiseWorkload) Prepare(_ context.Context, group int64, samples []int64) (*pipeline.Item, error) {
	per := tensor.NumElements(w.shape)
	it := &pipeline.Item{Group: group, Samples: samples, Latent: tensor.New(append([]int{len(samples)}, w.shape...)...), Guidance: w.guidance,
		Cache: pipeline.NewItemCache(w.cache, len(samples))}
	if w.sched != nil {
		it.SchedState = sched.InitialState(w.sched, 7, samples)
	}
	for r, s := range samples {
		rng := rand.New(rand.NewPCG(7, uint64(s)))
		for i := 0; i < per; i++ {
			it.Latent.Data[r*per+i] = float32(rng.NormFloat64()) * w.sigma
		}
		vec := tensor.New(w.shape[1])
		for i := range vec.Data {
			vec.Data[i] = float32(rng.NormFloat64())
		}
		it.Cond = append(it.Cond, model.Conditioning{synthetic.CondKey: vec})
	}
	return it, nil
}

func (w *noiseWorkload) Finish(_ context.Context, it *pipeline.Item) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	per := it.Latent.Len() / len(it.Samples)
	for r, s := range it.Samples {
		w.finals[s] = &tensor.Dense{Shape: w.shape, Data: append([]float32(nil), it.Latent.Data[r*per:(r+1)*per]...)}
		if it.Cache != nil {
			if w.logs == nil {
				w.logs = map[int64][]pipeline.CacheRecord{}
			}
			w.logs[s] = it.Cache.Log[r]
		}
		w.order = append(w.order, s)
	}
	return nil
}

type runSpec struct {
	stages, steps, samples, micro int
	guided                        bool
	cache                         pipeline.Cache
}

// runLocal runs a whole pipeline in this process over the in-process transport.
func runLocal(t *testing.T, rs runSpec, trs []comm.Transport) (map[int64]*tensor.Dense, error) {
	t.Helper()
	plan, err := pipeline.EvenStages(rs.steps, rs.stages)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := sched.New(sched.DefaultSVDConfig(), rs.steps)
	if err != nil {
		t.Fatal(err)
	}
	w := &noiseWorkload{shape: []int{3, 2, 4, 4}, sigma: sc.InitNoiseSigma, finals: map[int64]*tensor.Dense{}}
	if rs.guided {
		w.guidance = sched.GuidanceWeights(1, 3, 3)
	}
	if trs == nil && rs.stages > 1 {
		trs = comm.NewLocal(rs.stages, comm.Options{RecvTimeout: 10 * time.Second})
	}
	errs := make([]error, rs.stages)
	var wg sync.WaitGroup
	for k := 0; k < rs.stages; k++ {
		d, _ := synthetic.New(model.Config{})
		var tr comm.Transport
		if trs != nil {
			tr = trs[k]
		}
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			errs[k] = pipeline.Run(context.Background(), pipeline.Config{
				Plan: plan, Stage: k, PrevRank: k - 1, NextRank: k + 1, TotalSteps: rs.steps,
				NumSamples: rs.samples, MicroBatch: rs.micro, Transport: tr,
				Stepper: &pipeline.Stepper{Model: d, Sched: sc}, Workload: w,
			})
			if errs[k] != nil && tr != nil {
				tr.Close()
			}
		}(k)
	}
	wg.Wait()
	return w.finals, errors.Join(errs...)
}

func TestPipelineBitIdenticalToOneStage(t *testing.T) {
	tests := []runSpec{
		{stages: 2, steps: 4, samples: 5, micro: 1},
		{stages: 3, steps: 7, samples: 6, micro: 1},
		{stages: 4, steps: 4, samples: 3, micro: 2},
		{stages: 3, steps: 10, samples: 7, micro: 3, guided: true},
		{stages: 7, steps: 25, samples: 9, micro: 1, guided: true},
	}
	for _, rs := range tests {
		t.Run(fmt.Sprintf("%+v", rs), func(t *testing.T) {
			base := rs
			base.stages = 1
			want, err := runLocal(t, base, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := runLocal(t, rs, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != rs.samples || len(want) != rs.samples {
				t.Fatalf("got %d and %d finals, want %d", len(got), len(want), rs.samples)
			}
			for s := range want {
				if !tensor.BitEqual(got[s], want[s]) {
					t.Fatalf("sample %d differs: rel L2 %g", s, tensor.RelL2(got[s], want[s]))
				}
			}
		})
	}
}

// Guided and unguided runs must differ, or the CFG path would be untested.
func TestGuidanceChangesResult(t *testing.T) {
	a, err := runLocal(t, runSpec{stages: 1, steps: 3, samples: 1, micro: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := runLocal(t, runSpec{stages: 1, steps: 3, samples: 1, micro: 1, guided: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tensor.BitEqual(a[0], b[0]) {
		t.Fatal("guided result equals unguided result")
	}
}

// A dead stage makes its neighbours fail with an error naming the peer, not hang.
func TestPipelineDeadPeer(t *testing.T) {
	trs := comm.NewLocal(3, comm.Options{RecvTimeout: 2 * time.Second})
	trs[1].Close() // stage 1 is dead before it starts
	start := time.Now()
	_, err := runLocal(t, runSpec{stages: 3, steps: 6, samples: 4, micro: 1}, trs)
	if err == nil {
		t.Fatal("run with a dead stage succeeded")
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("took %v to notice", time.Since(start))
	}
	if !strings.Contains(err.Error(), "rank 1") {
		t.Fatalf("error does not name rank 1: %v", err)
	}
}
