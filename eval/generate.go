package eval

import (
	"context"
	"fmt"
	"image"

	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/model/svd"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/sched"
	"github.com/vdpp/vdpp/tensor"
)

// Generate turns img into one video in this process, as the SVD pipeline does:
// conditioning (CLIP embedding, VAE encoding of the noise-augmented image, added time ids),
// pr.Steps Euler v-prediction steps with per-frame classifier-free guidance (one
// pipeline.Stepper, the engine's step), and decoding. It returns frames [T, 3, H, W] in
// [0, 1]. sample keys the noise stream together with pr.Seed.
func Generate(ctx context.Context, p *svd.Pipeline, img image.Image, pr svd.Params, sample int64) (*tensor.Dense, error) {
	if err := p.Validate(pr); err != nil {
		return nil, err
	}
	clipPx, vaeImg, err := p.Preprocess(img, pr)
	if err != nil {
		return nil, err
	}
	aug, init := p.Noise(pr, sample)
	c, err := p.Condition(clipPx, vaeImg, aug, pr)
	if err != nil {
		return nil, err
	}
	e, err := sched.New(p.Sched, pr.Steps)
	if err != nil {
		return nil, err
	}
	for i := range init.Data {
		init.Data[i] *= e.InitNoiseSigma
	}
	it := &pipeline.Item{Samples: []int64{sample}, Latent: init, Cond: []model.Conditioning{c.Cond}}
	if pr.Guided() {
		it.Guidance = sched.GuidanceWeights(float32(pr.MinGuidance), float32(pr.MaxGuidance), pr.NumFrames)
	}
	st := &pipeline.Stepper{Model: &svd.Denoiser{P: p}, Sched: e}
	for k := 0; k < pr.Steps; k++ {
		it.Step = k
		if err := st.Step(ctx, it); err != nil {
			return nil, fmt.Errorf("eval: step %d: %w", k, err)
		}
	}
	raw, err := p.Decode(it.Latent, pr.DecodeChunkSize)
	if err != nil {
		return nil, err
	}
	return svd.ToUnit(raw), nil
}
