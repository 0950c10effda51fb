package vae

import (
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import

	"github.com/vdpp/vdpp/model/nn"
)

// buildDecoder is TemporalDecoder.forward on z [B·frames, latent, h, w] (B videos of
// frames consecutive frames, image_only_indicator all zeros) returning
// [B·frames, out, h·f, w·f]; root reads "decoder.*". With z nil it only declares the
// tensors.
func buildDecoder(root nn.Scope, g *Graph, z *Node, frames int, cfg Config) *Node {
	s := root.In("decoder")
	boc := cfg.BlockOutChannels
	n := len(boc)
	top := boc[n-1]

	h := conv2d(s, g, z, "conv_in", cfg.LatentChannels, top, 3, nn.ConvOpts{Padding: 1})

	// MidBlockTemporalDecoder(num_layers=layers_per_block): forward runs resnets[0], then
	// zip(resnets[1:], attentions) with a single attention, i.e. attentions[0] and
	// resnets[1] only; the other resnets are in the state_dict but never run.
	mid := s.In("mid_block")
	h = spatioTemporalResnet(mid.In("resnets.0"), g, h, frames, top, top)
	if cfg.LayersPerBlock >= 2 {
		h = attention(mid.In("attentions.0"), g, h, top)
		h = spatioTemporalResnet(mid.In("resnets.1"), g, h, frames, top, top)
	} else {
		attention(mid.In("attentions.0"), g, nil, top)
	}
	for j := 2; j < cfg.LayersPerBlock; j++ {
		spatioTemporalResnet(mid.Inf("resnets.%d", j), g, nil, frames, top, top)
	}

	// UpBlockTemporalDecoder x levels, layers_per_block+1 resnets each.
	out := boc[n-1]
	for i := range n {
		prev := out
		out = boc[n-1-i]
		b := s.Inf("up_blocks.%d", i)
		for j := range cfg.LayersPerBlock + 1 {
			cin := out
			if j == 0 {
				cin = prev
			}
			h = spatioTemporalResnet(b.Inf("resnets.%d", j), g, h, frames, cin, out)
		}
		if i < n-1 {
			h = upsample(b.In("upsamplers.0"), g, h, out)
		}
	}

	h = groupNormSiLU(s, g, h, "conv_norm_out", boc[0], spatialEps)
	h = conv2d(s, g, h, "conv_out", boc[0], cfg.OutChannels, 3, nn.ConvOpts{Padding: 1})

	// time_conv_out: Conv3d(out, out, (3, 1, 1), padding (1, 0, 0)) over each video's frames.
	oc := cfg.OutChannels
	tw := s.Param(g, "time_conv_out.weight", oc, oc, 3, 1, 1)
	tb := s.Param(g, "time_conv_out.bias", oc)
	if h == nil {
		return nil
	}
	d := h.Shape().Dimensions
	v := TransposeAllAxes(Reshape(h, d[0]/frames, frames, d[1], d[2], d[3]), 0, 2, 1, 3, 4)
	v = nn.Conv3DTime(v, tw, tb)
	return Reshape(TransposeAllAxes(v, 0, 2, 1, 3, 4), d...)
}
