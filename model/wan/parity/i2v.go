package parity

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/tensor"
	"github.com/vdpp/vdpp/video"
)

func init() {
	register("i2v_pipeline", i2vPipeline)
	registerLimits("i2v_pipeline", map[string]limit{
		"timesteps": {Exact: true}, "sigmas": {Exact: true}, "experts": {Exact: true}, "first_frame_mask": {Exact: true},
		"frames": {RelL2: RelL2Limit, MaxAbs: 1e-4},
	})
}

// i2vPipeline runs a WanImageToVideoPipeline case (scripts/wanref/i2v_cases.py) through the
// Wan family as the engine runs it: the family's image conditioning of the case's image
// (and last image) PNGs at the case's size (the CLIP processor's pixels and the image
// encoder's hidden_states[-2] with the image branch, the VAE input images, the condition
// or, with expand_timesteps, the image latents and the first-frame mask), then the
// pipeline of fullPipeline with that conditioning added to the prompt embeddings'.
func i2vPipeline(ctx context.Context, env *Env, c *Case) (map[string]*tensor.Dense, error) {
	s, err := sampler(env)
	if err != nil {
		return nil, err
	}
	var in family.Input
	if in.Image, err = video.LoadImage(filepath.Join(c.Dir, c.StringArg("image", "image.png"))); err != nil {
		return nil, err
	}
	if name := c.StringArg("last_image", ""); name != "" {
		if in.LastImage, err = video.LoadImage(filepath.Join(c.Dir, name)); err != nil {
			return nil, err
		}
	}
	ic, err := s.ImageConditioning(ctx, in, caseParams(c))
	if err != nil {
		return nil, err
	}
	if ic == nil {
		return nil, fmt.Errorf("case %s: the folder took no image conditioning", c.Name)
	}
	out, _, err := runPipeline(ctx, env, c, pipeline.Cache{}, ic.Cond())
	if err != nil {
		return nil, err
	}
	put := func(name string, t *tensor.Dense) {
		if t != nil {
			out[name] = t
		}
	}
	put("clip_pixel_values", ic.PixelValues)
	put("image_embeds", ic.ImageEmbeds)
	put("image_resized", ic.Resized)
	put("last_image_resized", ic.LastResized)
	if ic.FirstFrameMask != nil {
		put("latent_condition", ic.Condition)
		put("first_frame_mask", ic.FirstFrameMask)
	} else {
		put("condition", ic.Condition)
	}
	return out, nil
}
