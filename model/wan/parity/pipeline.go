package parity

import (
	"context"
	"fmt"
	"maps"
	"strconv"

	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/wan"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/tensor"
)

func init() {
	register("full_pipeline_moe", fullPipeline)
	registerLimits("full_pipeline_moe", map[string]limit{
		"timesteps": {Exact: true}, "sigmas": {Exact: true}, "experts": {Exact: true},
		"frames": {RelL2: RelL2Limit, MaxAbs: 1e-4},
	})
}

// fullPipeline runs WanPipeline's case through the Wan family as the engine runs it: the
// family's conditioning of the case's prompt embeddings, its scheduler and Stepper (both
// experts, CFG with each expert's guidance scale), starting from the case's initial
// latents, then its Decode. It records what the reference recorded: each step's cond,
// uncond and guided predictions and latents, the schedule and the expert of each step,
// the final latents, their denormalisation and the frames [B, F, H, W, 3].
func fullPipeline(ctx context.Context, env *Env, c *Case) (map[string]*tensor.Dense, error) {
	out, _, err := runPipeline(ctx, env, c, pipeline.Cache{}, nil)
	return out, err
}

// sampler returns the folder's Wan sampler with every role, loaded once per run.
func sampler(env *Env) (*wan.Sampler, error) {
	v, err := env.Cached("wan-sampler", func() (any, func() error, error) {
		s, err := wan.LoadOn(env.Folder.Dir, family.Options{Roles: family.AllRoles}, env.Backend)
		if err != nil {
			return nil, nil, err
		}
		return s, s.Close, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*wan.Sampler), nil
}

// caseParams are a pipeline case's generation parameters.
func caseParams(c *Case) family.Params {
	return family.Params{NumFrames: c.IntArg("num_frames", 0), Steps: c.IntArg("num_inference_steps", 0),
		Height: c.IntArg("height", 0), Width: c.IntArg("width", 0),
		GuidanceScale: c.FloatArg("guidance_scale", 0), GuidanceScale2: c.FloatArg("guidance_scale_2", 0)}
}

// runPipeline runs a pipeline case (fullPipeline) with the step cache rule (none when off)
// and the conditioning extra adds to every sample's (the image conditioning), and also
// returns the cache's records of each sample's calls.
func runPipeline(ctx context.Context, env *Env, c *Case, rule pipeline.Cache, extra model.Conditioning) (map[string]*tensor.Dense, [][]pipeline.CacheRecord, error) {
	s, err := sampler(env)
	if err != nil {
		return nil, nil, err
	}
	p := caseParams(c)
	if err := s.Validate(p); err != nil {
		return nil, nil, fmt.Errorf("case %s: %w", c.Name, err)
	}
	var in [3]*tensor.Dense
	for i, n := range []string{"prompt_embeds", "negative_prompt_embeds", "latents"} {
		if in[i], err = c.Input(n); err != nil {
			return nil, nil, err
		}
	}
	sc, err := s.Scheduler(p)
	if err != nil {
		return nil, nil, err
	}
	st, err := s.Stepper(sc)
	if err != nil {
		return nil, nil, err
	}
	out := map[string]*tensor.Dense{}
	batch := in[2].Shape[0]
	it := &pipeline.Item{Latent: wan.SwapTC(in[2]), Guidance: s.GuidanceWeights(p, in[2].Shape[2])}
	for b := range batch {
		cond, err := s.Conditioning(family.Input{PromptEmbeds: in[0].Rows(b, b+1), NegativePromptEmbeds: in[1].Rows(b, b+1)}, wan.Guided(p))
		if err != nil {
			return nil, nil, err
		}
		maps.Copy(cond, extra)
		it.Samples = append(it.Samples, int64(b))
		it.Cond = append(it.Cond, cond)
	}
	ranges := s.Folder.ExpertRanges(sc, s.Sched.NumTrainTimesteps())
	if rule.On() {
		var switches []int
		if ranges[0].Len() > 0 && ranges[1].Len() > 0 {
			switches = []int{ranges[1].Start}
		}
		if rule, err = rule.Resolve(p.Steps, switches); err != nil {
			return nil, nil, fmt.Errorf("case %s: %w", c.Name, err)
		}
		it.Cache = pipeline.NewItemCache(rule, batch)
	}
	shape := it.Latent.Shape
	st.Observe = func(_ *pipeline.Item, k int, raw *tensor.Dense, guided []float32) {
		n := tensor.NumElements(shape)
		key := strconv.Itoa(k)
		if raw.Len() == 2*n {
			out["noise_pred_uncond_step"+key] = wan.SwapTC(&tensor.Dense{Shape: shape, Data: raw.Data[:n]})
			out["noise_pred_cond_step"+key] = wan.SwapTC(&tensor.Dense{Shape: shape, Data: raw.Data[n:]})
		} else {
			out["noise_pred_cond_step"+key] = wan.SwapTC(&tensor.Dense{Shape: shape, Data: raw.Data})
		}
		out["noise_pred_step"+key] = wan.SwapTC(&tensor.Dense{Shape: shape, Data: guided})
	}
	st.Updated = func(it *pipeline.Item, k int) { out["latents_step"+strconv.Itoa(k)] = wan.SwapTC(it.Latent) }
	ts, sig, experts := tensor.New(p.Steps), tensor.New(p.Steps+1), tensor.New(p.Steps)
	for k := range p.Steps {
		it.Step = k
		if err := st.Step(ctx, it); err != nil {
			return nil, nil, err
		}
		ts.Data[k], sig.Data[k] = sc.Timestep(k), sc.Sigma(k)
		experts.Data[k] = 1
		if k >= ranges[1].Start && k < ranges[1].End {
			experts.Data[k] = 2
		}
	}
	sig.Data[p.Steps] = sc.Sigma(p.Steps)
	out["timesteps"], out["sigmas"], out["experts"] = ts, sig, experts
	final := wan.SwapTC(it.Latent)
	out["latents_final"] = final
	if out["latents_denorm"], err = s.VConfig.Denormalize(final); err != nil {
		return nil, nil, err
	}
	var frames []*tensor.Dense
	per := it.Latent.Len() / batch
	for b := range batch {
		f, err := s.Decode(ctx, &tensor.Dense{Shape: shape[1:], Data: it.Latent.Data[b*per : (b+1)*per]}, p)
		if err != nil {
			return nil, nil, err
		}
		frames = append(frames, channelsLast(f))
	}
	out["frames"] = stack(frames)
	var logs [][]pipeline.CacheRecord
	if it.Cache != nil {
		logs = it.Cache.Log
	}
	return out, logs, nil
}

// channelsLast turns frames [F, 3, H, W] into [F, H, W, 3].
func channelsLast(f *tensor.Dense) *tensor.Dense {
	n, c, plane := f.Shape[0], f.Shape[1], f.Shape[2]*f.Shape[3]
	out := tensor.New(n, f.Shape[2], f.Shape[3], c)
	for i := range n {
		for ch := range c {
			for p := range plane {
				out.Data[(i*plane+p)*c+ch] = f.Data[(i*c+ch)*plane+p]
			}
		}
	}
	return out
}

// stack joins equal tensors along a new leading axis.
func stack(ts []*tensor.Dense) *tensor.Dense {
	out := tensor.New(append([]int{len(ts)}, ts[0].Shape...)...)
	per := ts[0].Len()
	for i, t := range ts {
		copy(out.Data[i*per:(i+1)*per], t.Data)
	}
	return out
}
