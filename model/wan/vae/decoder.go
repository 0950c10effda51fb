package vae

import (
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import

	"github.com/vdpp/vdpp/model/nn"
)

// buildDecodeChunk builds post_quant_conv and the decoder on one chunk of latents
// [B, z, t, h, w] and returns the decoded frames [B, out·p², T, H, W] (not unpatchified,
// not clamped). first marks the video's first chunk (DupUp3D drops its leading frames).
// s is the root scope ("post_quant_conv.*", "decoder.*").
func buildDecodeChunk(s nn.Scope, g *Graph, z *Node, c *stepCache, cfg Config) *Node {
	x := causalConv(s, g, z, c, "post_quant_conv", cfg.ZDim, cfg.ZDim, 1)
	d := s.In("decoder")
	dims := cfg.decoderDims()
	up := cfg.temporalUpsample()
	x = causalConv(d, g, x, c, "conv_in", cfg.ZDim, dims[0], 3)
	x = midBlock(d.In("mid_block"), g, x, c, dims[0])
	n := len(cfg.DimMult)
	first := c == nil || c.first
	for i := range n {
		in, out := dims[i], dims[i+1]
		if i > 0 && !cfg.IsResidual {
			in /= 2 // the Wan 2.1 upsamplers halve the channels
		}
		upFlag := i != n-1
		mode := upsample2d
		if upFlag && up[i] {
			mode = upsample3d
		}
		b := d.Inf("up_blocks.%d", i)
		short := x
		for r := range cfg.NumResBlocks + 1 {
			x = resnet(b.Inf("resnets.%d", r), g, x, c, in, out)
			in = out
		}
		if cfg.IsResidual {
			if upFlag {
				x = upsample(b.In("upsampler"), g, x, c, mode, out, out)
				if x != nil {
					ft := 1
					if up[i] {
						ft = 2
					}
					x = Add(x, dupUp(short, out, ft, 2, first))
				}
			}
			continue
		}
		if upFlag {
			x = upsample(b.In("upsamplers.0"), g, x, c, mode, out, out/2)
		}
	}
	last := dims[n]
	x = rmsNormSiLU(d, g, x, "norm_out", last)
	return causalConv(d, g, x, c, "conv_out", last, cfg.OutChannels, 3)
}
