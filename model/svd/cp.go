package svd

import (
	"context"
	"fmt"

	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/model/svd/unet"
	"github.com/vdpp/vdpp/tensor"
)

var _ model.ContextParallel = (*Denoiser)(nil)

// PredictFrames implements model.ContextParallel: in.Latents holds frames
// [part.Lo, part.Hi) of every row, and the UNet exchanges what its temporal layers need
// through part.Comm (unet.Model.ForwardFrames). The output covers the same frames and,
// joined over the group, is Predict on all frames bit for bit where vdpp's CPU kernels
// run (to fp32 rounding, relative L2 within 1e-5, on XLA).
func (d *Denoiser) PredictFrames(ctx context.Context, in model.Input, part model.FramePart) (*tensor.Dense, error) {
	if part.Comm == nil {
		return nil, fmt.Errorf("svd: PredictFrames without a group")
	}
	if in.Latents != nil && len(in.Latents.Shape) == 5 && in.Latents.Shape[1] != part.Hi-part.Lo {
		return nil, fmt.Errorf("svd: latents hold %d frames, the part [%d, %d) of %d", in.Latents.Shape[1], part.Lo, part.Hi, part.Total)
	}
	sample, ts, ehs, ids, err := d.unetInputs(ctx, in)
	if err != nil {
		return nil, err
	}
	return d.P.UNet.ForwardFrames(ctx, sample, ts, ehs, ids, unet.Frames{Lo: part.Lo, Hi: part.Hi, Total: part.Total}, part.Comm)
}
