package vae

import (
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import

	"github.com/vdpp/vdpp/model/nn"
)

// encoderOutputs are the posterior tensors Encode returns, in this order.
type encoderOutputs struct {
	moments, mean, logvar, std *Node
}

// buildEncoder is Encoder(double_z=True) followed by quant_conv and the
// DiagonalGaussianDistribution of AutoencoderKLTemporalDecoder.encode, on image
// [N, in, H, W]; root reads "encoder.*" and "quant_conv.*". With image nil it only
// declares the tensors.
func buildEncoder(root nn.Scope, g *Graph, image *Node, cfg Config) encoderOutputs {
	s := root.In("encoder")
	boc := cfg.BlockOutChannels
	n := len(boc)
	lat2 := 2 * cfg.LatentChannels

	h := conv2d(s, g, image, "conv_in", cfg.InChannels, boc[0], 3, nn.ConvOpts{Padding: 1})
	out := boc[0]
	for i := range n {
		in := out
		out = boc[i]
		b := s.Inf("down_blocks.%d", i)
		for j := range cfg.LayersPerBlock {
			cin := out
			if j == 0 {
				cin = in
			}
			h = resnet2D(b.Inf("resnets.%d", j), g, h, cin, out)
		}
		if i < n-1 {
			h = downsample(b.In("downsamplers.0"), g, h, out)
		}
	}

	c := boc[n-1]
	mid := s.In("mid_block")
	h = resnet2D(mid.In("resnets.0"), g, h, c, c)
	h = attention(mid.In("attentions.0"), g, h, c)
	h = resnet2D(mid.In("resnets.1"), g, h, c, c)

	h = groupNormSiLU(s, g, h, "conv_norm_out", c, spatialEps)
	h = conv2d(s, g, h, "conv_out", c, lat2, 3, nn.ConvOpts{Padding: 1})
	moments := conv2d(root, g, h, "quant_conv", lat2, lat2, 1, nn.ConvOpts{})
	if moments == nil {
		return encoderOutputs{}
	}

	lc := cfg.LatentChannels
	mean := SliceAxis(moments, 1, AxisRange(0, lc))
	logvar := SliceAxis(moments, 1, AxisRange(lc, 2*lc))
	logvar = Clamp(Scalar(g, logvar.DType(), logvarMin), logvar, Scalar(g, logvar.DType(), logvarMax))
	std := Exp(MulScalar(logvar, 0.5))
	return encoderOutputs{moments: moments, mean: mean, logvar: logvar, std: std}
}
