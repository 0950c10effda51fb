package svd

import (
	"context"
	"errors"
	"fmt"

	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/svd/unet"
	"github.com/vdpp/vdpp/tensor"
)

var (
	_ family.Reinitializer = (*Sampler)(nil)
	_ family.Reconstructor = (*Sampler)(nil)
)

// WithDenoiserWeights implements family.Reinitializer: a Sampler on the same pipeline
// (configs, image encoder, VAE) whose UNet is built from init's weights for
// unet.ExpectedTensors of this UNet's config, on the same backend. Its Close closes only
// that UNet.
func (s *Sampler) WithDenoiserWeights(init func(shapes map[string][]int) map[string]*tensor.Dense) (family.Sampler, error) {
	if s.P.UNet == nil {
		return nil, errors.New("svd: this process did not load the UNet")
	}
	exp, err := unet.ExpectedTensors(s.P.UNetConfig)
	if err != nil {
		return nil, err
	}
	um, err := unet.New(s.P.UNetConfig, init(exp), s.P.UNet.Backend())
	if err != nil {
		return nil, fmt.Errorf("svd: reinitialised UNet: %w", err)
	}
	q := *s.P
	q.UNet = um
	return &Sampler{P: &q, sampling: s.sampling, release: um.Close}, nil
}

// Reconstruct implements family.Reconstructor: frames mapped to [-1, 1], encoded by the
// VAE encoder (every frame), the posterior's mode times the VAE's scaling factor, decoded
// in chunks of p.DecodeChunkSize frames (0: all together) and mapped to [0, 1].
func (s *Sampler) Reconstruct(ctx context.Context, frames *tensor.Dense, p family.Params) (*tensor.Dense, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.P.VAEEnc == nil {
		return nil, errors.New("svd: this process did not load the VAE encoder")
	}
	x := tensor.New(frames.Shape...)
	for i, v := range frames.Data {
		x.Data[i] = 2*v - 1
	}
	post, err := s.P.VAEEnc.Encode(x)
	if err != nil {
		return nil, err
	}
	z := post.Mode()
	sf := float32(s.P.VAEConfig.ScalingFactor)
	for i := range z.Data {
		z.Data[i] *= sf
	}
	raw, err := s.P.Decode(z, p.DecodeChunkSize)
	if err != nil {
		return nil, err
	}
	return ToUnit(raw), nil
}
