package parity

import (
	"context"
	"fmt"

	"github.com/vdpp/vdpp/internal/paritycheck"
	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/model/svd"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/sched"
	"github.com/vdpp/vdpp/tensor"
)

// deepCachePipeline replays DeepCache's SVD loop (the dev-deepcache golden) through the
// engine's step cache: the same guided Euler loop as fullPipeline from already conditioned
// inputs, with the item's cache rule deepcache at the case's interval and branch (steps
// 0, K, 2K, ... run the whole UNet and keep the feature, the others only the shallow part);
// then the same loop uncached.
func deepCachePipeline(ctx context.Context, p *svd.Pipeline, c *paritycheck.Case) (computed, error) {
	in, err := inputs(c, "init_noise", "image_embeddings", "image_latents", "added_time_ids")
	if err != nil {
		return computed{}, err
	}
	initNoise := in[0]
	if len(initNoise.Shape) != 5 || initNoise.Shape[0] != 1 {
		return computed{}, fmt.Errorf("init_noise %v: want [1,T,C,h,w]", initNoise.Shape)
	}
	cond, err := cfgConditioning(in[1], in[2], in[3])
	if err != nil {
		return computed{}, err
	}
	interval, branch, steps := c.IntArg("cache_interval", 0), c.IntArg("cache_branch", -1), c.IntArg("num_inference_steps", 0)
	if interval < 1 || branch < 0 || steps < 1 {
		return computed{}, fmt.Errorf("case args: cache_interval %d, cache_branch %d, num_inference_steps %d", interval, branch, steps)
	}
	sc, err := sched.New(p.Sched, steps)
	if err != nil {
		return computed{}, err
	}
	frames := initNoise.Shape[1]
	guidance := sched.GuidanceWeights(float32(c.FloatArg("min_guidance_scale", 1)), float32(c.FloatArg("max_guidance_scale", 3)), frames)
	chunk := c.IntArg("decode_chunk_size", frames)

	out := map[string]*tensor.Dense{
		"sigmas":    {Shape: []int{len(sc.Sigmas)}, Data: sc.Sigmas},
		"timesteps": {Shape: []int{len(sc.Timesteps)}, Data: sc.Timesteps},
	}
	limits := map[string]paritycheck.Limit{"sigmas": ulpLimit, "timesteps": ulpLimit, "computed": exactLimit,
		"frames_raw": frameLimit, "frames_raw_uncached": frameLimit}
	loop := func(rule pipeline.Cache, observe func(k int, modelOut *tensor.Dense, guided []float32)) (*pipeline.Item, error) {
		latent := initNoise.Clone()
		for i := range latent.Data {
			latent.Data[i] *= sc.InitNoiseSigma
		}
		st := &pipeline.Stepper{Model: &svd.Denoiser{P: p}, Sched: sc}
		if observe != nil {
			st.Observe = func(_ *pipeline.Item, k int, modelOut *tensor.Dense, guided []float32) { observe(k, modelOut, guided) }
		}
		it := &pipeline.Item{Samples: []int64{0}, Latent: latent, Cond: []model.Conditioning{cond}, Guidance: guidance,
			Cache: pipeline.NewItemCache(rule, 1)}
		for k := range steps {
			it.Step = k
			if err := st.Step(ctx, it); err != nil {
				return nil, err
			}
			if observe != nil {
				out[fmt.Sprintf("latents_step%d", k)] = latent.Clone()
			}
		}
		return it, nil
	}
	decode := func(latent *tensor.Dense) (*tensor.Dense, error) {
		raw, err := p.Decode(latent, chunk)
		if err != nil {
			return nil, err
		}
		return permuteTCHWtoCTHW(raw), nil
	}

	rule, err := pipeline.Cache{Mode: pipeline.CacheDeep, Interval: interval, Branch: branch}.Resolve(steps, nil)
	if err != nil {
		return computed{}, err
	}
	it, err := loop(rule, func(k int, modelOut *tensor.Dense, guided []float32) {
		out[fmt.Sprintf("unet_out_step%d", k)] = modelOut.Clone()
		out[fmt.Sprintf("v_guided_step%d", k)] = &tensor.Dense{Shape: initNoise.Shape, Data: append([]float32(nil), guided...)}
	})
	if err != nil {
		return computed{}, fmt.Errorf("cached loop: %w", err)
	}
	if out["computed"], err = computedSteps(it.Cache.Log[0], steps); err != nil {
		return computed{}, err
	}
	out["latents_final"] = it.Latent
	if out["frames_raw"], err = decode(it.Latent); err != nil {
		return computed{}, err
	}
	if it, err = loop(pipeline.Cache{}, nil); err != nil {
		return computed{}, fmt.Errorf("uncached loop: %w", err)
	}
	out["latents_final_uncached"] = it.Latent
	if out["frames_raw_uncached"], err = decode(it.Latent); err != nil {
		return computed{}, err
	}
	return computed{tensors: out, limits: limits}, nil
}

// cfgConditioning returns the conditioning of the cond row of the CFG-batched inputs
// (row 0 unconditional, row 1 conditional), checking that the unconditional row is what
// the engine's denoiser makes of it: zero embedding and zero image latents, the same
// added time ids.
func cfgConditioning(emb, lat, ids *tensor.Dense) (model.Conditioning, error) {
	for _, t := range []*tensor.Dense{emb, lat, ids} {
		if len(t.Shape) < 2 || t.Shape[0] != 2 {
			return nil, fmt.Errorf("conditioning %v: want 2 rows (uncond, cond)", t.Shape)
		}
	}
	for _, t := range []*tensor.Dense{emb.Rows(0, 1), lat.Rows(0, 1)} {
		for _, v := range t.Data {
			if v != 0 {
				return nil, fmt.Errorf("the unconditional row of %v is not zero", t.Shape)
			}
		}
	}
	u, c := ids.Rows(0, 1), ids.Rows(1, 2)
	if !tensor.BitEqual(u, c) {
		return nil, fmt.Errorf("added_time_ids differ between the CFG rows: %v, %v", u.Data, c.Data)
	}
	return model.Conditioning{svd.KeyImageEmbeddings: emb.Rows(1, 2), svd.KeyImageLatents: lat.Rows(1, 2), svd.KeyAddedTimeIDs: c}, nil
}

// computedSteps turns a sample's cache records into DeepCache's per-step flag (1: the
// whole UNet ran). Both CFG branches of a step must agree: DeepCache runs them as one batch.
func computedSteps(log []pipeline.CacheRecord, steps int) (*tensor.Dense, error) {
	flags := tensor.New(steps)
	seen := make([]int, steps)
	for _, r := range log {
		if r.Step < 0 || r.Step >= steps {
			return nil, fmt.Errorf("cache record of step %d in a %d-step run", r.Step, steps)
		}
		v := float32(0)
		if r.Computed {
			v = 1
		}
		if seen[r.Step] > 0 && flags.Data[r.Step] != v {
			return nil, fmt.Errorf("step %d: the CFG branches took different decisions", r.Step)
		}
		flags.Data[r.Step] = v
		seen[r.Step]++
	}
	for k, n := range seen {
		if n != 2 {
			return nil, fmt.Errorf("step %d has %d cache records, want one per CFG branch", k, n)
		}
	}
	return flags, nil
}
