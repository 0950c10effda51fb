package wan_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/internal/shared"
	"github.com/vdpp/vdpp/model/family"
	_ "github.com/vdpp/vdpp/model/wan" // registers the family
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/safetensors"
	"github.com/vdpp/vdpp/sched"
	"github.com/vdpp/vdpp/tensor"
)

// frameWorkload prepares samples with a Wan sampler and decodes them on the last stage.
type frameWorkload struct {
	s      family.Sampler
	in     family.Input
	p      family.Params
	sc     sched.Scheduler
	mu     *sync.Mutex
	frames map[int64]*tensor.Dense
	// logs, when set, receives each finished sample's cache records (p.Cache).
	logs map[int64][]pipeline.CacheRecord
	// windows, when set, runs the samples as temporal windows.
	windows *pipeline.Windows
}

func (w *frameWorkload) Prepare(ctx context.Context, group int64, samples []int64) (*pipeline.Item, error) {
	it, err := w.s.Prepare(ctx, w.in, w.p, w.sc, samples)
	if err != nil {
		return nil, err
	}
	it.Group = group
	it.Cache = pipeline.NewItemCache(w.p.Cache, len(samples))
	it.Windows = w.windows
	return it, nil
}

func (w *frameWorkload) Finish(ctx context.Context, it *pipeline.Item) error {
	per := it.Latent.Len() / len(it.Samples)
	for r, s := range it.Samples {
		f, err := w.s.Decode(ctx, &tensor.Dense{Shape: it.Latent.Shape[1:], Data: it.Latent.Data[r*per : (r+1)*per]}, w.p)
		if err != nil {
			return err
		}
		w.mu.Lock()
		w.frames[s] = f
		if w.logs != nil && it.Cache != nil {
			w.logs[s] = it.Cache.Log[r]
		}
		w.mu.Unlock()
	}
	return nil
}

// generate runs a whole generation on the dev checkpoint over stages in-process stages
// planned by the family (a cut at the expert switch) and returns each sample's frames and
// the components each stage loaded.
func generate(t *testing.T, dir string, in family.Input, p family.Params, stages, samples int) (map[int64]*tensor.Dense, [][]string) {
	t.Helper()
	return generateW(t, dir, in, p, stages, samples, false)
}

// generateWindows is generate with p's temporal windows (family.Description.Windows).
func generateWindows(t *testing.T, dir string, in family.Input, p family.Params, stages int) (map[int64]*tensor.Dense, [][]string) {
	t.Helper()
	return generateW(t, dir, in, p, stages, 1, true)
}

func generateW(t *testing.T, dir string, in family.Input, p family.Params, stages, samples int, windowed bool) (map[int64]*tensor.Dense, [][]string) {
	t.Helper()
	r, err := family.ResolveDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := r.StagePlan(p.Steps, stages, nil)
	if err != nil {
		t.Fatal(err)
	}
	var trs []comm.Transport
	if stages > 1 {
		trs = comm.NewLocal(stages, comm.Options{RecvTimeout: 30 * time.Second})
	}
	frames, mu := map[int64]*tensor.Dense{}, &sync.Mutex{}
	loaded := make([][]string, stages)
	errs := make([]error, stages)
	var wg sync.WaitGroup
	for k := range stages {
		roles := family.Roles{Condition: k == 0, Denoise: true, Decode: k == stages-1, Steps: plan[k], TotalSteps: p.Steps}
		s, err := r.Open(family.Options{Roles: roles})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		for name := range s.WeightBytes() {
			loaded[k] = append(loaded[k], name)
		}
		slices.Sort(loaded[k])
		sc, err := s.Scheduler(p)
		if err != nil {
			t.Fatal(err)
		}
		st, err := s.Stepper(sc)
		if err != nil {
			t.Fatal(err)
		}
		var tr comm.Transport
		if trs != nil {
			tr = trs[k]
		}
		wl := &frameWorkload{s: s, in: in, p: p, sc: sc, mu: mu, frames: frames}
		if windowed {
			desc, err := r.Describe()
			if err != nil {
				t.Fatal(err)
			}
			if p, err = desc.ResolveWindows(p); err != nil {
				t.Fatal(err)
			}
			if wl.windows = desc.Windows(p, s); wl.windows == nil {
				t.Fatalf("%d frames in windows of %d: no windows", p.NumFrames, p.Window)
			}
			wl.p = p
		}
		wg.Add(1)
		go func(k int, wl pipeline.Workload, st *pipeline.Stepper, tr comm.Transport) {
			defer wg.Done()
			errs[k] = pipeline.Run(context.Background(), pipeline.Config{
				Plan: plan, Stage: k, PrevRank: k - 1, NextRank: k + 1, TotalSteps: p.Steps,
				NumSamples: samples, MicroBatch: 1, Transport: tr, Stepper: st, Workload: wl,
			})
			if errs[k] != nil && tr != nil {
				tr.Close()
			}
		}(k, wl, st, tr)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return frames, loaded
}

func devEmbeddings(t *testing.T, dir string) family.Input {
	t.Helper()
	f, err := safetensors.Open(filepath.Join(dir, "cases", "full_pipeline_moe", "inputs.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var in family.Input
	if in.PromptEmbeds, err = f.Tensor("prompt_embeds"); err != nil {
		t.Fatal(err)
	}
	if in.NegativePromptEmbeds, err = f.Tensor("negative_prompt_embeds"); err != nil {
		t.Fatal(err)
	}
	return in
}

// A generation on the dev checkpoint gives bit-identical frames for 1 to 4 stages: UniPC's
// history travels in the hand-off, and each stage loads only the expert its steps use.
func TestStageCutsBitIdentical(t *testing.T) {
	dir := shared.Require(t, "golden", "wan-dev")
	in := devEmbeddings(t, dir)
	p := family.Params{NumFrames: 9, Steps: 6, Height: 64, Width: 64, GuidanceScale: 4, GuidanceScale2: 3, Seed: 11}
	want, loaded := generate(t, dir, in, p, 1, 2)
	if fmt.Sprint(loaded) != "[[transformer transformer_2 vae]]" {
		t.Errorf("one stage loaded %v", loaded)
	}
	wantLoaded := map[int]string{
		2: "[[transformer] [transformer_2 vae]]",
		3: "[[transformer] [transformer_2] [transformer_2 vae]]",
		4: "[[transformer] [transformer_2] [transformer_2] [transformer_2 vae]]",
	}
	samplesFor := map[int]int{2: 2, 3: 1, 4: 1} // two samples where micro-batches interleave; one keeps the test fast
	for k := 2; k <= 4; k++ {
		got, loaded := generate(t, dir, in, p, k, samplesFor[k])
		if s := fmt.Sprint(loaded); s != wantLoaded[k] {
			t.Errorf("%d stages loaded %s, want %s", k, s, wantLoaded[k])
		}
		if len(got) != samplesFor[k] {
			t.Fatalf("%d stages: %d samples, want %d", k, len(got), samplesFor[k])
		}
		for s, f := range want {
			if s >= int64(samplesFor[k]) {
				continue
			}
			if !slices.Equal(got[s].Data, f.Data) || !slices.Equal(got[s].Shape, f.Shape) {
				t.Errorf("%d stages: sample %d differs from one stage (rel L2 %.3g)", k, s, tensor.RelL2(got[s], f))
			}
		}
	}
	if f := want[0]; !slices.Equal(f.Shape, []int{9, 3, 64, 64}) {
		t.Errorf("frames %v", f.Shape)
	}
}
