package svd

import (
	"context"
	"fmt"

	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/tensor"
)

// Denoiser is the model.Denoiser of SVD: for each row it concatenates the image latents
// (repeated over frames) to the scaled latent on the channel axis and runs the UNet with the
// image embedding and added time ids; unconditional rows get zero embedding and zero image
// latents (diffusers' negative conditioning).
type Denoiser struct {
	P *Pipeline
}

// WeightBytes implements model.Denoiser.
func (d *Denoiser) WeightBytes() int64 { return d.P.UNet.WeightBytes() }

// Close releases the UNet.
func (d *Denoiser) Close() error { return d.P.Close() }

// Predict implements model.Denoiser.
func (d *Denoiser) Predict(ctx context.Context, in model.Input) (*tensor.Dense, error) {
	sample, ts, ehs, ids, err := d.unetInputs(ctx, in)
	if err != nil {
		return nil, err
	}
	return d.P.UNet.Forward(sample, ts, ehs, ids)
}

// unetInputs builds the UNet's inputs for in: the sample [N, T, 2C, h, w] (each row's
// scaled latent with its image latents concatenated on the channel axis, zeros for
// unconditional rows), the timestep [1], ehs [N, 1, D] and the added time ids [N, 3].
// T is whatever in.Latents holds (all frames for Predict, a member's for PredictFrames).
func (d *Denoiser) unetInputs(ctx context.Context, in model.Input) (sample, ts, ehs, ids *tensor.Dense, err error) {
	if err := in.Validate(); err != nil {
		return nil, nil, nil, nil, fmt.Errorf("svd: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, nil, nil, err
	}
	n, t, c, h, w := in.Latents.Shape[0], in.Latents.Shape[1], in.Latents.Shape[2], in.Latents.Shape[3], in.Latents.Shape[4]
	cfg := d.P.UNetConfig
	if 2*c != cfg.InChannels {
		return nil, nil, nil, nil, fmt.Errorf("svd: latent has %d channels, the UNet takes %d (latent + image latents)", c, cfg.InChannels)
	}
	plane := h * w
	sample = tensor.New(n, t, 2*c, h, w)
	dim := cfg.CrossAttentionDim[0]
	ehs = tensor.New(n, 1, dim)
	ids = tensor.New(n, 3)
	for r := 0; r < n; r++ {
		cond := in.Cond[r]
		emb, lat, tid := cond[KeyImageEmbeddings], cond[KeyImageLatents], cond[KeyAddedTimeIDs]
		if emb == nil || lat == nil || tid == nil {
			return nil, nil, nil, nil, fmt.Errorf("svd: row %d lacks conditioning (%s, %s, %s)", r, KeyImageEmbeddings, KeyImageLatents, KeyAddedTimeIDs)
		}
		if emb.Len() != dim || lat.Len() != c*plane || tid.Len() != 3 {
			return nil, nil, nil, nil, fmt.Errorf("svd: row %d conditioning shapes %v %v %v do not fit latent %v", r, emb.Shape, lat.Shape, tid.Shape, in.Latents.Shape)
		}
		copy(ids.Data[3*r:3*r+3], tid.Data)
		if !in.Uncond[r] {
			copy(ehs.Data[r*dim:(r+1)*dim], emb.Data)
		}
		for f := 0; f < t; f++ {
			src := in.Latents.Data[((r*t+f)*c)*plane : ((r*t+f)*c+c)*plane]
			dst := sample.Data[((r*t+f)*2*c)*plane : ((r*t+f)*2*c+2*c)*plane]
			copy(dst[:c*plane], src)
			if !in.Uncond[r] {
				copy(dst[c*plane:], lat.Data)
			}
		}
	}
	ts = &tensor.Dense{Shape: []int{1}, Data: []float32{in.Timestep}}
	return sample, ts, ehs, ids, nil
}
