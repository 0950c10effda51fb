package parity

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/vdpp/vdpp/model/wan/transformer"
	"github.com/vdpp/vdpp/sched"
	"github.com/vdpp/vdpp/tensor"
)

func init() {
	register("full_pipeline_moe", fullPipeline)
	registerLimits("full_pipeline_moe", map[string]limit{
		"timesteps": {exact: true}, "sigmas": {exact: true}, "experts": {exact: true},
		"frames": {relL2: RelL2Limit, maxAbs: 1e-4},
	})
}

// fullPipeline replays WanPipeline.__call__ with classifier-free guidance from fixed prompt
// embeddings and initial latents: the folder's UniPC schedule, per step the expert of the
// timestep (model/wan Folder.ExpertFor) on prompt_embeds then on negative_prompt_embeds,
// uncond + g·(cond − uncond) with that expert's guidance scale, the scheduler step; then
// the latents denormalised with the VAE's latents_mean / latents_std, decoded, and mapped
// to frames [B, F, H, W, 3] in [0, 1].
func fullPipeline(_ context.Context, env *Env, c *Case) (map[string]*tensor.Dense, error) {
	var in [3]*tensor.Dense
	var err error
	for i, n := range []string{"prompt_embeds", "negative_prompt_embeds", "latents"} {
		if in[i], err = c.Input(n); err != nil {
			return nil, err
		}
	}
	cond, uncond, latents := in[0], in[1], in[2].Clone()
	steps, ok := c.Args["num_inference_steps"].(float64)
	if !ok || steps < 1 {
		return nil, fmt.Errorf("case %s: args.num_inference_steps missing", c.Name)
	}
	g1, ok := c.Args["guidance_scale"].(float64)
	if !ok {
		return nil, fmt.Errorf("case %s: args.guidance_scale missing", c.Name)
	}
	g2, ok := c.Args["guidance_scale_2"].(float64)
	if !ok {
		g2 = g1 // diffusers: guidance_scale_2 defaults to guidance_scale
	}
	f := env.Folder
	cfg, err := sched.LoadUniPCConfig(filepath.Join(f.ComponentDir("scheduler"), "scheduler_config.json"))
	if err != nil {
		return nil, err
	}
	u, err := sched.NewUniPC(cfg, int(steps))
	if err != nil {
		return nil, err
	}
	out := map[string]*tensor.Dense{}
	ts := u.Timesteps()
	experts := make([]float32, len(ts))
	st := u.NewState()
	for i, t := range ts {
		expert := f.ExpertFor(float64(t), cfg.NumTrainTimesteps)
		experts[i] = float32(expert)
		g := float32(g1)
		if expert == 2 {
			g = float32(g2)
		}
		dir, err := f.TransformerDir(expert)
		if err != nil {
			return nil, err
		}
		v, err := env.Cached("transformer:"+dir+":", func() (any, func() error, error) {
			m, err := transformer.Load(dir, "", env.Backend)
			if err != nil {
				return nil, nil, err
			}
			return m, m.Close, nil
		})
		if err != nil {
			return nil, err
		}
		m := v.(*transformer.Model)
		tt := &tensor.Dense{Shape: []int{latents.Shape[0]}, Data: make([]float32, latents.Shape[0])}
		for j := range tt.Data {
			tt.Data[j] = t
		}
		pc, err := m.Forward(latents, tt, cond, nil)
		if err != nil {
			return nil, fmt.Errorf("step %d cond: %w", i, err)
		}
		pu, err := m.Forward(latents, tt, uncond, nil)
		if err != nil {
			return nil, fmt.Errorf("step %d uncond: %w", i, err)
		}
		guided := tensor.New(pc.Shape...)
		for j := range guided.Data {
			d := pc.Data[j] - pu.Data[j]
			guided.Data[j] = pu.Data[j] + float32(g*d)
		}
		next, err := u.Step(st, guided.Data, t, latents.Data)
		if err != nil {
			return nil, fmt.Errorf("step %d: %w", i, err)
		}
		latents = &tensor.Dense{Shape: latents.Shape, Data: next}
		out[fmt.Sprintf("noise_pred_cond_step%d", i)] = pc
		out[fmt.Sprintf("noise_pred_uncond_step%d", i)] = pu
		out[fmt.Sprintf("noise_pred_step%d", i)] = guided
		out[fmt.Sprintf("latents_step%d", i)] = latents
	}
	out["timesteps"] = &tensor.Dense{Shape: []int{len(ts)}, Data: ts}
	sig := u.Sigmas()
	out["sigmas"] = &tensor.Dense{Shape: []int{len(sig)}, Data: sig}
	out["experts"] = &tensor.Dense{Shape: []int{len(experts)}, Data: experts}
	out["latents_final"] = latents

	vc := *c
	vc.Args = map[string]any{"model_dir": "vae"}
	vm, err := loadVAE(env, &vc)
	if err != nil {
		return nil, err
	}
	denorm, err := vm.Config().Denormalize(latents)
	if err != nil {
		return nil, err
	}
	out["latents_denorm"] = denorm
	video, err := vm.Decode(denorm) // [B, 3, F, H, W]
	if err != nil {
		return nil, err
	}
	out["frames"] = toFrames(video)
	return out, nil
}

// toFrames is postprocess_video(output_type="np"): (video/2 + 0.5) clamped to [0, 1],
// [B, C, F, H, W] -> [B, F, H, W, C].
func toFrames(video *tensor.Dense) *tensor.Dense {
	s := video.Shape
	b, ch, nf, h, w := s[0], s[1], s[2], s[3], s[4]
	out := tensor.New(b, nf, h, w, ch)
	for bi := range b {
		for ci := range ch {
			for fi := range nf {
				for y := range h {
					for x := range w {
						v := video.Data[(((bi*ch+ci)*nf+fi)*h+y)*w+x]
						v = v/2 + 0.5
						v = min(max(v, 0), 1)
						out.Data[(((bi*nf+fi)*h+y)*w+x)*ch+ci] = v
					}
				}
			}
		}
	}
	return out
}
