package svd

import (
	"fmt"

	"github.com/vdpp/vdpp/model/svd/vae"
	"github.com/vdpp/vdpp/tensor"
)

// Decode turns one sample's final latent [T, C, h, w] (or [1, T, C, h, w]) into raw frames
// [T, 3, H, W] (about [-1, 1]): z = latents / scaling_factor, decoded in chunks of chunk
// frames (<= 0: all at once), each chunk seeing only its own frames, as diffusers does.
func (p *Pipeline) Decode(latents *tensor.Dense, chunk int) (*tensor.Dense, error) {
	if p.VAEDec == nil {
		return nil, fmt.Errorf("svd: this process did not load the VAE decoder")
	}
	return p.decodeWith(p.VAEDec, latents, chunk)
}

// decodeWith is Decode with the decoder dec (VAEDec, maybe tiled).
func (p *Pipeline) decodeWith(dec *vae.Model, latents *tensor.Dense, chunk int) (*tensor.Dense, error) {
	z, err := p.unscale(latents)
	if err != nil {
		return nil, err
	}
	frames, err := dec.Decode(z, chunk)
	if err != nil {
		return nil, fmt.Errorf("svd: VAE decode: %w", err)
	}
	return frames, nil
}

// DecodeChunks decodes as Decode does and hands the raw frames to emit a group of chunks at
// a time, in order (vae.Model.DecodeChunks).
func (p *Pipeline) DecodeChunks(latents *tensor.Dense, chunk int, emit func(first int, frames *tensor.Dense) error) error {
	if p.VAEDec == nil {
		return fmt.Errorf("svd: this process did not load the VAE decoder")
	}
	return p.decodeChunksWith(p.VAEDec, latents, chunk, emit)
}

// decodeChunksWith is DecodeChunks with the decoder dec (VAEDec, maybe tiled).
func (p *Pipeline) decodeChunksWith(dec *vae.Model, latents *tensor.Dense, chunk int, emit func(first int, frames *tensor.Dense) error) error {
	z, err := p.unscale(latents)
	if err != nil {
		return err
	}
	if err := dec.DecodeChunks(z, chunk, emit); err != nil {
		return fmt.Errorf("svd: VAE decode: %w", err)
	}
	return nil
}

// unscale returns latents [T, C, h, w] (or [1, T, C, h, w]) / scaling_factor as [T, C, h, w].
func (p *Pipeline) unscale(latents *tensor.Dense) (*tensor.Dense, error) {
	shape := latents.Shape
	if len(shape) == 5 && shape[0] == 1 {
		shape = shape[1:]
	}
	if len(shape) != 4 {
		return nil, fmt.Errorf("svd: decode wants [T,C,h,w], got %v", latents.Shape)
	}
	z := tensor.New(shape...)
	sf := float32(p.VAEConfig.ScalingFactor)
	for i, v := range latents.Data {
		z.Data[i] = v / sf
	}
	return z, nil
}

// ToUnit maps raw frames to [0, 1] as diffusers' postprocess does: (x / 2 + 0.5).clamp(0, 1).
func ToUnit(raw *tensor.Dense) *tensor.Dense {
	out := tensor.New(raw.Shape...)
	for i, v := range raw.Data {
		u := v/2 + 0.5
		out.Data[i] = min(max(u, 0), 1)
	}
	return out
}
