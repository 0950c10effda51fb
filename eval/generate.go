package eval

import (
	"context"
	"fmt"
	"image"

	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/tensor"
)

// Generate turns img into one video in this process through the family seam: the
// sampler's Prepare (for SVD: CLIP embedding, VAE encoding of the noise-augmented image,
// added time ids, the initial noise), pr.Steps steps of its Stepper (the engine's step) and
// its Decode. It returns frames [T, 3, H, W] in [0, 1]. sample keys the noise stream
// together with pr.Seed.
func Generate(ctx context.Context, s family.Sampler, img image.Image, pr family.Params, sample int64) (*tensor.Dense, error) {
	if err := s.Validate(pr); err != nil {
		return nil, err
	}
	sc, err := s.Scheduler(pr.Steps)
	if err != nil {
		return nil, err
	}
	it, err := s.Prepare(ctx, family.Input{Image: img}, pr, sc, []int64{sample})
	if err != nil {
		return nil, err
	}
	st, err := s.Stepper(sc)
	if err != nil {
		return nil, err
	}
	for k := 0; k < pr.Steps; k++ {
		it.Step = k
		if err := st.Step(ctx, it); err != nil {
			return nil, fmt.Errorf("eval: step %d: %w", k, err)
		}
	}
	return s.Decode(ctx, it.Latent, pr)
}
