package parity

import (
	"context"
	"fmt"
	"sort"

	"github.com/gomlx/gomlx/backends"

	"github.com/vdpp/vdpp/internal/paritycheck"
	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/model/checkpoint"
	"github.com/vdpp/vdpp/model/svd"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/sched"
	"github.com/vdpp/vdpp/tensor"
)

// Run loads the checkpoint at dir (all components) on backend and checks every case under
// dir/cases. progress, when not nil, is told each case as it starts.
func Run(ctx context.Context, dir string, backend backends.Backend, progress func(string)) (Report, error) {
	rep := Report{Dir: dir, Backend: backend.Name()}
	cases, err := ListCases(dir)
	if err != nil {
		return rep, err
	}
	p, err := svd.Load(dir, "", backend, svd.AllParts)
	if err != nil {
		return rep, err
	}
	defer p.Close()
	for _, path := range cases {
		c, err := readCase(path)
		if err != nil {
			return rep, err
		}
		if progress != nil {
			progress(c.Name)
		}
		got, err := runCase(ctx, p, c)
		names := make([]string, 0, len(c.Outputs))
		for n := range c.Outputs {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			var r Result
			if err != nil {
				r = Result{Case: c.Name, Tensor: n, Shape: c.Outputs[n].Shape, Error: err.Error()}
			} else {
				r = compare(c.Name, n, got.tensors[n], c.Outputs[n], got.limitFor(n))
			}
			rep.Results = append(rep.Results, r)
		}
	}
	rep.Pass = rep.Err() == nil
	return rep, nil
}

// computed holds a case's outputs and per-tensor limits.
type computed struct {
	tensors map[string]*tensor.Dense
	limits  map[string]paritycheck.Limit
}

func (c computed) limitFor(name string) paritycheck.Limit {
	if l, ok := c.limits[name]; ok {
		return l
	}
	return relLimit
}

func runCase(ctx context.Context, p *svd.Pipeline, c *paritycheck.Case) (computed, error) {
	switch c.Kind {
	case "unet_forward":
		return unetForward(p, c)
	case "vae_encode":
		return vaeEncode(p, c)
	case "vae_decode":
		return vaeDecode(p, c)
	case "clip_image_embeds":
		return clipEmbeds(p, c)
	case "full_pipeline":
		return fullPipeline(ctx, p, c)
	case "full_pipeline_deepcache":
		return deepCachePipeline(ctx, p, c)
	}
	return computed{}, fmt.Errorf("unknown case type %q", c.Kind)
}

func inputs(c *paritycheck.Case, names ...string) ([]*tensor.Dense, error) {
	out := make([]*tensor.Dense, len(names))
	for i, n := range names {
		t, err := c.Input(n)
		if err != nil {
			return nil, err
		}
		out[i] = t
	}
	return out, nil
}

func unetForward(p *svd.Pipeline, c *paritycheck.Case) (computed, error) {
	in, err := inputs(c, "sample", "timestep", "encoder_hidden_states", "added_time_ids")
	if err != nil {
		return computed{}, err
	}
	out, err := p.UNet.Forward(in[0], in[1], in[2], in[3])
	if err != nil {
		return computed{}, err
	}
	return computed{tensors: map[string]*tensor.Dense{"sample_out": out}}, nil
}

func vaeEncode(p *svd.Pipeline, c *paritycheck.Case) (computed, error) {
	img, err := c.Input("image")
	if err != nil {
		return computed{}, err
	}
	post, err := p.VAEEnc.Encode(img)
	if err != nil {
		return computed{}, err
	}
	return computed{tensors: map[string]*tensor.Dense{
		"moments": post.Moments, "mean": post.Mean, "mode": post.Mode(), "logvar": post.LogVar, "std": post.Std,
	}}, nil
}

func vaeDecode(p *svd.Pipeline, c *paritycheck.Case) (computed, error) {
	lat, err := c.Input("latents")
	if err != nil {
		return computed{}, err
	}
	out, err := p.VAEDec.Decode(lat, c.IntArg("num_frames", lat.Shape[0]))
	if err != nil {
		return computed{}, err
	}
	return computed{tensors: map[string]*tensor.Dense{"frames": out}}, nil
}

func clipEmbeds(p *svd.Pipeline, c *paritycheck.Case) (computed, error) {
	px, err := c.Input("pixel_values")
	if err != nil {
		return computed{}, err
	}
	emb, last, err := p.CLIP.Forward(px)
	if err != nil {
		return computed{}, err
	}
	return computed{tensors: map[string]*tensor.Dense{"image_embeds": emb, "last_hidden_state": last}}, nil
}

// fullPipeline replays diffusers' loop with the engine's own code: svd conditioning, the
// pipeline.Stepper (scale, UNet on [uncond, cond], per-frame guidance, Euler step) and the
// chunked decode.
func fullPipeline(ctx context.Context, p *svd.Pipeline, c *paritycheck.Case) (computed, error) {
	in, err := inputs(c, "clip_pixel_values", "vae_image", "aug_noise", "init_noise")
	if err != nil {
		return computed{}, err
	}
	initNoise := in[3]
	if len(initNoise.Shape) != 5 || initNoise.Shape[0] != 1 {
		return computed{}, fmt.Errorf("init_noise %v: want [1,T,C,h,w]", initNoise.Shape)
	}
	frames := initNoise.Shape[1]
	pr := svd.Params{
		NumFrames: frames, Steps: c.IntArg("num_inference_steps", 25),
		Height: c.IntArg("height", in[1].Shape[2]), Width: c.IntArg("width", in[1].Shape[3]),
		MinGuidance: c.FloatArg("min_guidance_scale", 1), MaxGuidance: c.FloatArg("max_guidance_scale", 3),
		FPS: c.IntArg("fps", 7), MotionBucketID: c.IntArg("motion_bucket_id", 127),
		NoiseAugStrength: c.FloatArg("noise_aug_strength", 0.02),
	}
	cond, err := p.Condition(in[0], in[1], in[2], pr)
	if err != nil {
		return computed{}, err
	}
	sc, err := sched.New(p.Sched, pr.Steps)
	if err != nil {
		return computed{}, err
	}
	out := map[string]*tensor.Dense{}
	limits := map[string]paritycheck.Limit{"sigmas": ulpLimit, "timesteps": ulpLimit}
	d := cond.ImageEmbeds.Shape[len(cond.ImageEmbeds.Shape)-1]
	embs := tensor.New(2, 1, d)
	copy(embs.Data[d:], cond.ImageEmbeds.Data)
	out["image_embeddings"] = embs
	out["vae_image_augmented"] = cond.AugmentedImage
	il := cond.ImageLatents
	lat2 := tensor.New(append([]int{2}, il.Shape[1:]...)...)
	copy(lat2.Data[il.Len():], il.Data)
	out["image_latents"] = lat2
	ids2 := tensor.New(2, 3)
	copy(ids2.Data, cond.AddedTimeIDs.Data)
	copy(ids2.Data[3:], cond.AddedTimeIDs.Data)
	out["added_time_ids"] = ids2
	out["sigmas"] = &tensor.Dense{Shape: []int{len(sc.Sigmas)}, Data: sc.Sigmas}
	out["timesteps"] = &tensor.Dense{Shape: []int{len(sc.Timesteps)}, Data: sc.Timesteps}

	latent := initNoise.Clone()
	for i := range latent.Data {
		latent.Data[i] *= sc.InitNoiseSigma
	}
	out["latents_init"] = latent.Clone()
	var guidance []float32
	if pr.Guided() {
		guidance = sched.GuidanceWeights(float32(pr.MinGuidance), float32(pr.MaxGuidance), frames)
		out["guidance_scale"] = &tensor.Dense{Shape: []int{1, frames}, Data: guidance}
	}
	// The steps through the family seam (the engine's step with SVD's denoiser); the
	// conditioning and the decode above and below are SVD's own calls, since parity
	// compares their intermediate tensors and takes the case's noise.
	st, err := svd.NewSampler(p, checkpoint.DefaultSampling).Stepper(sc)
	if err != nil {
		return computed{}, err
	}
	st.Observe = func(_ *pipeline.Item, k int, modelOut *tensor.Dense, guided []float32) {
		out[fmt.Sprintf("unet_out_step%d", k)] = modelOut.Clone()
		out[fmt.Sprintf("v_guided_step%d", k)] = &tensor.Dense{Shape: latent.Shape, Data: append([]float32(nil), guided...)}
	}
	it := &pipeline.Item{Samples: []int64{0}, Latent: latent, Cond: []model.Conditioning{cond.Cond}, Guidance: guidance}
	for k := 0; k < pr.Steps; k++ {
		it.Step = k
		if err := st.Step(ctx, it); err != nil {
			return computed{}, err
		}
		out[fmt.Sprintf("latents_step%d", k)] = latent.Clone()
	}
	chunks := c.IntListArg("decode_chunk_sizes")
	if len(chunks) == 0 {
		chunks = []int{frames}
	}
	for i, chunk := range chunks {
		raw, err := p.Decode(latent, chunk)
		if err != nil {
			return computed{}, err
		}
		suffix := ""
		if i > 0 {
			suffix = fmt.Sprintf("_chunk%d", chunk)
		}
		out["frames_raw"+suffix] = permuteTCHWtoCTHW(raw)
		unit := svd.ToUnit(raw)
		unit.Shape = append([]int{1}, unit.Shape...)
		out["frames"+suffix] = unit
		limits["frames_raw"+suffix] = frameLimit
		limits["frames"+suffix] = frameLimit
	}
	return computed{tensors: out, limits: limits}, nil
}

// permuteTCHWtoCTHW turns decoded [T,C,H,W] into diffusers' [1,C,T,H,W] video layout.
func permuteTCHWtoCTHW(x *tensor.Dense) *tensor.Dense {
	t, c, h, w := x.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3]
	out := tensor.New(1, c, t, h, w)
	plane := h * w
	for ti := 0; ti < t; ti++ {
		for ci := 0; ci < c; ci++ {
			copy(out.Data[(ci*t+ti)*plane:(ci*t+ti+1)*plane], x.Data[(ti*c+ci)*plane:(ti*c+ci+1)*plane])
		}
	}
	return out
}
