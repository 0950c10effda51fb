package vae

import (
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import

	"github.com/vdpp/vdpp/model/nn"
)

// BuildEncoderMoments builds the encoder and quant_conv on image [N, in, H, W] and returns
// the moments [N, 2·latent, h, w] (posterior mean, then the raw, unclamped logvar), the
// graph a training loss differentiates. Weights are read through s with diffusers names.
func BuildEncoderMoments(s nn.Scope, image *Node, cfg Config) *Node {
	return buildEncoder(s, image.Graph(), image, cfg).moments
}

// BuildDecoder builds the temporal decoder on z [B·frames, latent, h, w] (B videos of
// frames consecutive frames, not divided by anything) and returns [B·frames, out, H, W].
func BuildDecoder(s nn.Scope, z *Node, frames int, cfg Config) *Node {
	return buildDecoder(s, z.Graph(), z, frames, cfg)
}
