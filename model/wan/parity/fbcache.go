package parity

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/tensor"
)

func init() {
	register("full_pipeline_fbcache", fbcachePipeline)
	registerLimits("full_pipeline_fbcache", map[string]limit{
		"computed": {Exact: true}, "timesteps": {Exact: true},
		"frames": {RelL2: RelL2Limit, MaxAbs: 1e-4}, "frames_uncached": {RelL2: RelL2Limit, MaxAbs: 1e-4},
	})
}

// fbcachePipeline runs WanPipeline's case with diffusers' First Block Cache on both
// experts (args.threshold) through the Wan family and the engine's step cache, as generate
// --cache fbcache runs it, then the same case uncached. It records, for every transformer
// call in call order (per step cond, then uncond), whether the remaining blocks ran
// (computed) and the value compared with the threshold (compared_value, -1 where there
// was none); each step's guided prediction and latents; the final latents and frames; and
// the uncached run's final latents and frames.
func fbcachePipeline(ctx context.Context, env *Env, c *Case) (map[string]*tensor.Dense, error) {
	th := c.FloatArg("threshold", 0)
	if th <= 0 {
		return nil, fmt.Errorf("case %s: args.threshold %v", c.Name, th)
	}
	out, logs, err := runPipeline(ctx, env, c, pipeline.Cache{Mode: pipeline.CacheFB, Threshold: th}, nil)
	if err != nil {
		return nil, err
	}
	if len(logs) != 1 {
		return nil, fmt.Errorf("case %s: %d samples; the reference's calls are one sample's", c.Name, len(logs))
	}
	computed, value := tensor.New(len(logs[0])), tensor.New(len(logs[0]))
	for i, r := range logs[0] {
		if r.Computed {
			computed.Data[i] = 1
		}
		value.Data[i] = r.Value
		if math.IsNaN(float64(r.Value)) {
			value.Data[i] = -1
		}
	}
	res := map[string]*tensor.Dense{"computed": computed, "compared_value": value}
	for name, t := range out {
		if strings.HasPrefix(name, "noise_pred_step") || strings.HasPrefix(name, "latents_step") || name == "latents_final" || name == "frames" || name == "timesteps" {
			res[name] = t
		}
	}
	plain, _, err := runPipeline(ctx, env, c, pipeline.Cache{}, nil)
	if err != nil {
		return nil, err
	}
	res["latents_final_uncached"], res["frames_uncached"] = plain["latents_final"], plain["frames"]
	return res, nil
}
