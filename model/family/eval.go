package family

import (
	"context"

	"github.com/vdpp/vdpp/tensor"
)

// Reinitializer is implemented by Samplers whose denoiser can be swapped for a freshly
// initialised one (eval's untrained baseline): WithDenoiserWeights returns a Sampler that
// shares everything this one loaded but the denoiser, whose weights init returns for the
// tensor shapes the denoiser expects (its parameter names). Closing the returned Sampler
// releases only that denoiser; this one must stay open while it is used.
type Reinitializer interface {
	WithDenoiserWeights(init func(shapes map[string][]int) map[string]*tensor.Dense) (Sampler, error)
}

// Reconstructor is implemented by Samplers that can take frames through their VAE and
// back (eval's round trip, the ceiling of what the decoder can draw): Reconstruct encodes
// frames [T, 3, H, W] with values in [0, 1] (every frame; the posterior's mode, scaled as
// a latent) and decodes them as Decode does with p (p.DecodeChunkSize frames together),
// returning frames [T, 3, H, W] in [0, 1]. The Sampler needs the Condition and Decode
// roles.
type Reconstructor interface {
	Reconstruct(ctx context.Context, frames *tensor.Dense, p Params) (*tensor.Dense, error)
}
