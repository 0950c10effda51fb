package vae

import (
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import

	"github.com/vdpp/vdpp/model/nn"
)

// buildEncodeChunk builds the encoder on one chunk of video [B, in, T, H, W] (already
// patchified) plus quant_conv, and returns the moments [B, 2z, t, h, w]. s is the root
// scope ("encoder.*", "quant_conv.*").
func buildEncodeChunk(s nn.Scope, g *Graph, x *Node, c *stepCache, cfg Config) *Node {
	e := s.In("encoder")
	dims := cfg.encoderDims()
	x = causalConv(e, g, x, c, "conv_in", cfg.InChannels, dims[0], 3)
	n := len(cfg.DimMult)
	idx := 0
	for i := range n {
		in, out := dims[i], dims[i+1]
		down := i != n-1
		mode := downsample2d
		if down && cfg.TemporalDownsample[i] {
			mode = downsample3d
		}
		if cfg.IsResidual {
			b := e.Inf("down_blocks.%d", i)
			short := x
			for r := range cfg.NumResBlocks {
				x = resnet(b.Inf("resnets.%d", r), g, x, c, in, out)
				in = out
			}
			if down {
				x = downsample(b.In("downsampler"), g, x, c, mode, out)
			}
			if x != nil {
				ft, fs := 1, 1
				if down {
					fs = 2
					if cfg.TemporalDownsample[i] {
						ft = 2
					}
				}
				x = Add(x, avgDown(short, out, ft, fs))
			}
			continue
		}
		for range cfg.NumResBlocks {
			x = resnet(e.Inf("down_blocks.%d", idx), g, x, c, in, out)
			in = out
			idx++
		}
		if down {
			x = downsample(e.Inf("down_blocks.%d", idx), g, x, c, mode, out)
			idx++
		}
	}
	top := dims[n]
	x = midBlock(e.In("mid_block"), g, x, c, top)
	x = rmsNormSiLU(e, g, x, "norm_out", top)
	x = causalConv(e, g, x, c, "conv_out", top, 2*cfg.ZDim, 3)
	return causalConv(s, g, x, c, "quant_conv", 2*cfg.ZDim, 2*cfg.ZDim, 1)
}
