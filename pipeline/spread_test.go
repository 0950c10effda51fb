package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/model/synthetic"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/sched"
	"github.com/vdpp/vdpp/tensor"
)

// partRecord is what every rank's partWorkload writes to: the joined outputs and which rank
// computed each part.
type partRecord struct {
	mu     sync.Mutex
	joined map[int64]*tensor.Dense
	byRank map[int]int
}

// partWorkload is noiseWorkload whose finishing work is a nonlinear map of the final latent
// cut into parts of chunk frames (a stand-in for a chunked VAE decode).
type partWorkload struct {
	*noiseWorkload
	rank  int
	chunk int
	rec   *partRecord
	slow  time.Duration // added to every part this rank computes
}

func (w *partWorkload) Parts() int { return len(tensor.Chunks(w.shape[0], 0, w.chunk)) }

func (w *partWorkload) FinishPart(_ context.Context, _ int64, lat *tensor.Dense, part int) (*tensor.Dense, error) {
	// The part's cost, on the bubble's fake clock (TestSpreadBitIdenticalToLastStage): what
	// the receive timeouts are measured against, not an ordering guess.
	time.Sleep(w.slow)
	c := tensor.Chunks(lat.Shape[0], 0, w.chunk)[part]
	in := lat.Rows(c[0], c[1])
	out := tensor.New(in.Shape...)
	for i, v := range in.Data {
		out.Data[i] = float32(math.Tanh(float64(v)*1.7)) + float32(i%5)*v*v
	}
	w.rec.mu.Lock()
	w.rec.byRank[w.rank]++
	w.rec.mu.Unlock()
	return out, nil
}

func (w *partWorkload) JoinParts(_ context.Context, sample int64, _ *tensor.Dense, parts []*tensor.Dense) error {
	out, err := tensor.ConcatRows(parts)
	if err != nil {
		return err
	}
	w.rec.mu.Lock()
	defer w.rec.mu.Unlock()
	if w.rec.joined[sample] != nil {
		return fmt.Errorf("sample %d joined twice", sample)
	}
	w.rec.joined[sample] = out
	return nil
}

// Finish is the one-rank path: every part here, in order.
func (w *partWorkload) Finish(ctx context.Context, it *pipeline.Item) error {
	per := it.Latent.Len() / len(it.Samples)
	for r, s := range it.Samples {
		lat := &tensor.Dense{Shape: w.shape, Data: it.Latent.Data[r*per : (r+1)*per]}
		var parts []*tensor.Dense
		for p := range w.Parts() {
			out, err := w.FinishPart(ctx, s, lat, p)
			if err != nil {
				return err
			}
			parts = append(parts, out)
		}
		if err := w.JoinParts(ctx, s, lat, parts); err != nil {
			return err
		}
	}
	return nil
}

type spreadSpec struct {
	stages, steps, samples, micro, chunk int
	spread                               []int         // ranks; nil: the last stage alone
	lastPart                             time.Duration // the last stage's time per part
	timeout                              time.Duration // receive timeout (default 10 s)
}

func runSpread(t *testing.T, rs spreadSpec) (*partRecord, error) {
	t.Helper()
	plan, err := pipeline.EvenStages(rs.steps, rs.stages)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := sched.New(sched.DefaultSVDConfig(), rs.steps)
	if err != nil {
		t.Fatal(err)
	}
	rec := &partRecord{joined: map[int64]*tensor.Dense{}, byRank: map[int]int{}}
	var trs []comm.Transport
	if rs.stages > 1 || rs.spread != nil {
		timeout := rs.timeout
		if timeout == 0 {
			timeout = 10 * time.Second
		}
		trs = comm.NewLocal(rs.stages, comm.Options{RecvTimeout: timeout})
	}
	errs := make([]error, rs.stages)
	var wg sync.WaitGroup
	for k := range rs.stages {
		d, _ := synthetic.New(model.Config{})
		var tr comm.Transport
		if trs != nil {
			tr = trs[k]
		}
		w := &partWorkload{noiseWorkload: &noiseWorkload{shape: []int{7, 2, 3, 3}, sigma: sc.InitNoiseSigma, finals: map[int64]*tensor.Dense{}},
			rank: k, chunk: rs.chunk, rec: rec}
		if k == rs.stages-1 {
			w.slow = rs.lastPart
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[k] = pipeline.Run(context.Background(), pipeline.Config{
				Plan: plan, Stage: k, PrevRank: k - 1, NextRank: k + 1, TotalSteps: rs.steps,
				NumSamples: rs.samples, MicroBatch: rs.micro, Transport: tr,
				Stepper: &pipeline.Stepper{Model: d, Sched: sc}, Workload: w,
				Spread: pipeline.Spread{Last: rs.stages - 1, Ranks: rs.spread},
			})
			if errs[k] != nil && tr != nil {
				tr.Close()
			}
		}()
	}
	wg.Wait()
	return rec, errors.Join(errs...)
}

// TestSpreadBitIdenticalToLastStage: a sample's parts computed on several ranks and joined
// on the last stage give the bits of the one-rank run, and each rank computes the share
// Spread.PartsOf says. Each case runs in a synctest bubble: the in-process transport's
// receive timeouts and the parts' costs are on a fake clock.
func TestSpreadBitIdenticalToLastStage(t *testing.T) {
	for _, rs := range []spreadSpec{
		{stages: 2, steps: 4, samples: 5, micro: 1, chunk: 3, spread: []int{1, 0}},
		{stages: 3, steps: 6, samples: 4, micro: 2, chunk: 2, spread: []int{2, 1, 0}},
		{stages: 3, steps: 3, samples: 3, micro: 1, chunk: 7, spread: []int{2, 0}},    // one part: spread over samples
		{stages: 4, steps: 8, samples: 6, micro: 1, chunk: 4, spread: []int{0, 1, 2}}, // the last stage hands out everything
		// Rank 0's next part comes after the last stage has decoded its own parts of the
		// item (2 x 400 ms), longer than a receive may wait (150 ms): no silent peer.
		{stages: 2, steps: 2, samples: 2, micro: 1, chunk: 3, spread: []int{1, 0}, lastPart: 400 * time.Millisecond, timeout: 150 * time.Millisecond},
	} {
		t.Run(fmt.Sprintf("%+v", rs), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := spreadSpec{stages: 1, steps: rs.steps, samples: rs.samples, micro: rs.micro, chunk: rs.chunk}
				want, err := runSpread(t, base)
				if err != nil {
					t.Fatal(err)
				}
				got, err := runSpread(t, rs)
				if err != nil {
					t.Fatal(err)
				}
				if len(got.joined) != rs.samples || len(want.joined) != rs.samples {
					t.Fatalf("joined %d and %d samples, want %d", len(got.joined), len(want.joined), rs.samples)
				}
				for s := range want.joined {
					if !tensor.BitEqual(got.joined[s], want.joined[s]) {
						t.Fatalf("sample %d differs: rel L2 %g", s, tensor.RelL2(got.joined[s], want.joined[s]))
					}
				}
				groups := pipeline.Groups(rs.samples, rs.micro)
				items := pipeline.ReplicaItems(len(groups), 0, 1)
				parts := len(tensor.Chunks(7, 0, rs.chunk))
				for k := range rs.stages {
					want := 0
					if slices.Contains(rs.spread, k) {
						want = pipeline.Spread{Last: rs.stages - 1, Ranks: rs.spread}.PartsOf(k, items, groups, parts)
					}
					if got.byRank[k] != want {
						t.Errorf("rank %d computed %d parts, want %d (all: %v)", k, got.byRank[k], want, got.byRank)
					}
				}
			})
		})
	}
}

func TestSpreadCheck(t *testing.T) {
	for _, sp := range []pipeline.Spread{{Last: 3, Ranks: []int{0}}, {Last: 1, Ranks: []int{1, 1}}, {Last: 1, Ranks: []int{0, 5}}} {
		if err := sp.Check(2); err == nil {
			t.Errorf("%+v: no error", sp)
		}
	}
	if err := (pipeline.Spread{Last: 1, Ranks: []int{1, 0}}).Check(2); err != nil {
		t.Error(err)
	}
}
