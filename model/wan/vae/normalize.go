package vae

import (
	"fmt"

	"github.com/vdpp/vdpp/tensor"
)

// Normalize maps latents [B, z, f, h, w] as the encoder gives them to the scale the Wan
// transformers work in, per channel c: (x − mean[c]) · (1/std[c]), in float32 as the Wan
// pipelines compute it (latents_std = 1 / tensor(std) in float32). It returns a new tensor.
func (c Config) Normalize(latents *tensor.Dense) (*tensor.Dense, error) {
	return c.perChannel(latents, func(x, mean, invStd float32) float32 { return (x - mean) * invStd })
}

// Denormalize is the inverse map applied before decoding: x / (1/std[c]) + mean[c] in
// float32, exactly as WanPipeline does before vae.decode. It returns a new tensor.
func (c Config) Denormalize(latents *tensor.Dense) (*tensor.Dense, error) {
	return c.perChannel(latents, func(x, mean, invStd float32) float32 { return x/invStd + mean })
}

// perChannel applies f to every value of latents with its channel's mean and 1/std.
func (c Config) perChannel(latents *tensor.Dense, f func(x, mean, invStd float32) float32) (*tensor.Dense, error) {
	if err := checkTensor(latents, 5, c.ZDim, "latents"); err != nil {
		return nil, err
	}
	out := tensor.New(latents.Shape...)
	per := tensor.NumElements(latents.Shape[2:])
	for i := range latents.Data {
		ch := i / per % c.ZDim
		mean := float32(c.LatentsMean[ch])
		inv := float32(1) / float32(c.LatentsStd[ch])
		out.Data[i] = f(latents.Data[i], mean, inv)
	}
	return out, nil
}

// checkTensor checks that t is rank rank with channels on axis 1 and no empty axis.
func checkTensor(t *tensor.Dense, rank, channels int, what string) error {
	if t == nil {
		return fmt.Errorf("%w: %s is nil", ErrInput, what)
	}
	if len(t.Shape) != rank || t.Shape[1] != channels {
		return fmt.Errorf("%w: %s %v is not [B, %d, F, H, W]", ErrInput, what, t.Shape, channels)
	}
	for _, d := range t.Shape {
		if d <= 0 {
			return fmt.Errorf("%w: %s %v has an empty axis", ErrInput, what, t.Shape)
		}
	}
	if len(t.Data) != tensor.NumElements(t.Shape) {
		return fmt.Errorf("%w: %s has %d values for shape %v", ErrInput, what, len(t.Data), t.Shape)
	}
	return nil
}
