package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/sched"
	"github.com/vdpp/vdpp/tensor"
)

// NoiseWorkload is the benchmark's source and sink: sample s starts from N(0,1) noise drawn
// from a PCG stream keyed by (seed, s), times the scheduler's init_noise_sigma, with a
// per-channel conditioning vector from the same stream; finished latents and completion
// times are recorded.
type NoiseWorkload struct {
	Seed           int64
	Shape          []int   // per-sample latent shape [T, C, H, W]
	InitNoiseSigma float32 // from the scheduler
	// Scheduler, when set, gives each item its initial scheduler state (the noise keys of
	// a scheduler that draws noise, sched.InitialState).
	Scheduler sched.Scheduler
	Guidance  []float32
	Now       func() time.Time
	// Cond builds a sample's conditioning from its noise stream (after the latent noise was
	// drawn); nil gives none (a denoiser that reads no conditioning).
	Cond func(r *rand.Rand) model.Conditioning
	// Cache is the items' step cache rule (zero: none).
	Cache pipeline.Cache

	mu          sync.Mutex
	completions map[int64]int64
	finals      map[int64]*tensor.Dense
	caches      map[int64]pipeline.CacheSummary
}

// cached records the step cache of an item's samples (at their last step).
func (w *NoiseWorkload) cached(it *pipeline.Item) {
	if it.Cache == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.caches == nil {
		w.caches = map[int64]pipeline.CacheSummary{}
	}
	for r, s := range it.Samples {
		w.caches[s] = pipeline.Summarize(w.Cache, slices.Clone(it.Cache.Log[r]))
	}
}

// Caches returns each sample's step cache summary, by id (nil without a cache).
func (w *NoiseWorkload) Caches() map[int64]pipeline.CacheSummary {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.caches
}

// SampleNoise returns sample s's initial noise (unscaled) and the stream it was drawn from,
// positioned for drawing the sample's conditioning.
func SampleNoise(seed, s int64, shape []int) (*tensor.Dense, *rand.Rand) {
	r := rand.New(rand.NewPCG(uint64(seed), uint64(s)))
	noise := tensor.New(shape...)
	for i := range noise.Data {
		noise.Data[i] = float32(r.NormFloat64())
	}
	return noise, r
}

// RandomTensor draws a tensor of N(0,1) values from r.
func RandomTensor(r *rand.Rand, shape ...int) *tensor.Dense {
	t := tensor.New(shape...)
	for i := range t.Data {
		t.Data[i] = float32(r.NormFloat64())
	}
	return t
}

// Prepare implements pipeline.Workload.
func (w *NoiseWorkload) Prepare(_ context.Context, group int64, samples []int64) (*pipeline.Item, error) {
	if len(w.Shape) != 4 {
		return nil, fmt.Errorf("bench: latent shape %v is not [T,C,H,W]", w.Shape)
	}
	per := tensor.NumElements(w.Shape)
	lat := tensor.New(append([]int{len(samples)}, w.Shape...)...)
	it := &pipeline.Item{Group: group, Samples: samples, Latent: lat, Guidance: w.Guidance, Cache: pipeline.NewItemCache(w.Cache, len(samples))}
	if w.Scheduler != nil {
		it.SchedState = sched.InitialState(w.Scheduler, w.Seed, samples)
	}
	for r, s := range samples {
		noise, rng := SampleNoise(w.Seed, s, w.Shape)
		dst := lat.Data[r*per : (r+1)*per]
		for i, v := range noise.Data {
			dst[i] = v * w.InitNoiseSigma
		}
		c := model.Conditioning{}
		if w.Cond != nil {
			c = w.Cond(rng)
		}
		it.Cond = append(it.Cond, c)
	}
	return it, nil
}

// Finish implements pipeline.Workload.
func (w *NoiseWorkload) Finish(_ context.Context, it *pipeline.Item) error {
	now := time.Now
	if w.Now != nil {
		now = w.Now
	}
	t := now().UnixNano()
	per := it.Latent.Len() / len(it.Samples)
	for r, s := range it.Samples {
		w.recordAt(s, &tensor.Dense{Shape: w.Shape, Data: it.Latent.Data[r*per : (r+1)*per]}, t)
	}
	return nil
}

// record notes sample s complete now with final latent lat.
func (w *NoiseWorkload) record(s int64, lat *tensor.Dense) {
	now := time.Now
	if w.Now != nil {
		now = w.Now
	}
	w.recordAt(s, lat, now().UnixNano())
}

func (w *NoiseWorkload) recordAt(s int64, lat *tensor.Dense, t int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.completions == nil {
		w.completions = map[int64]int64{}
		w.finals = map[int64]*tensor.Dense{}
	}
	w.completions[s] = t
	w.finals[s] = &tensor.Dense{Shape: append([]int(nil), w.Shape...), Data: append([]float32(nil), lat.Data...)}
}

// Results returns the completion time (Unix ns) and final latent of each sample, by id.
func (w *NoiseWorkload) Results() (map[int64]int64, map[int64]*tensor.Dense) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.completions, w.finals
}
