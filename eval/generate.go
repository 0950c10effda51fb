package eval

import (
	"context"
	"fmt"
	"image"
	"time"

	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/tensor"
)

// Generate turns img into one video in this process through the family seam: the
// sampler's Prepare (for SVD: CLIP embedding, VAE encoding of the noise-augmented image,
// added time ids, the initial noise), pr.Steps steps of its Stepper (the engine's step,
// with pr.Cache's step cache when it is on: resolve it with family.Resolved.ResolveCache)
// and its Decode. It returns frames [T, 3, H, W] in [0, 1]. sample keys the noise stream
// together with pr.Seed.
func Generate(ctx context.Context, s family.Sampler, img image.Image, pr family.Params, sample int64) (*tensor.Dense, error) {
	out, _, err := GenerateStats(ctx, s, img, pr, sample)
	return out, err
}

// Stats are what generations did: the time spent in the denoising steps and, with a
// step cache, the denoiser calls that ran in full out of all calls (0 and 0 without one).
type Stats struct {
	Videos               int
	Diffusion            time.Duration
	ComputedCalls, Calls int
	// Caches are the generations' step cache summaries (none without a cache).
	Caches []pipeline.CacheSummary
}

// Add adds o to s.
func (s *Stats) Add(o Stats) {
	s.Videos += o.Videos
	s.Diffusion += o.Diffusion
	s.ComputedCalls += o.ComputedCalls
	s.Calls += o.Calls
	s.Caches = append(s.Caches, o.Caches...)
}

// GenerateStats is Generate, also returning what the generation did.
func GenerateStats(ctx context.Context, s family.Sampler, img image.Image, pr family.Params, sample int64) (*tensor.Dense, Stats, error) {
	return GenerateInput(ctx, s, family.Input{Image: img}, pr, sample)
}

// GenerateInput is GenerateStats from any family's input (an image, or a text-to-video
// model's prompt).
func GenerateInput(ctx context.Context, s family.Sampler, in family.Input, pr family.Params, sample int64) (*tensor.Dense, Stats, error) {
	if err := s.Validate(pr); err != nil {
		return nil, Stats{}, err
	}
	sc, err := s.Scheduler(pr)
	if err != nil {
		return nil, Stats{}, err
	}
	it, err := s.Prepare(ctx, in, pr, sc, []int64{sample})
	if err != nil {
		return nil, Stats{}, err
	}
	it.Cache = pipeline.NewItemCache(pr.Cache, 1)
	st, err := s.Stepper(sc)
	if err != nil {
		return nil, Stats{}, err
	}
	start := time.Now()
	for k := 0; k < pr.Steps; k++ {
		it.Step = k
		if err := st.Step(ctx, it); err != nil {
			return nil, Stats{}, fmt.Errorf("eval: step %d: %w", k, err)
		}
	}
	stats := Stats{Videos: 1, Diffusion: time.Since(start)}
	if it.Cache != nil {
		stats.ComputedCalls, stats.Calls = it.Cache.Computed(0)
		stats.Caches = []pipeline.CacheSummary{pipeline.Summarize(pr.Cache, it.Cache.Log[0])}
	}
	out, err := s.Decode(ctx, it.Latent, pr)
	return out, stats, err
}

// CountingGenerator is PipelineGenerator adding every generation's Stats to into (the
// generator must not be called concurrently).
func CountingGenerator(s family.Sampler, pr family.Params, into *Stats) Generator {
	return func(ctx context.Context, img image.Image, sample int64) (*tensor.Dense, error) {
		out, st, err := GenerateStats(ctx, s, img, pr, sample)
		into.Add(st)
		return out, err
	}
}
