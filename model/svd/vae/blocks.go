package vae

import (
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import

	"github.com/vdpp/vdpp/model/nn"
)

// The building blocks below follow one convention: every tensor a block owns is read with
// Scope.Param first, and when x is nil the block only declares them and returns nil. That
// is how modules that exist in the state_dict but are never run by the reference (the
// decoder mid block's resnets beyond the second, its attention when layers_per_block is 1)
// are declared by the very code that would run them.

// Fixed hyper-parameters of AutoencoderKLTemporalDecoder (not in its config).
const (
	groups      = GroupNormGroups // every GroupNorm has 32 groups
	spatialEps  = 1e-6            // ResnetBlock2D, Attention, conv_norm_out
	temporalEps = 1e-5            // TemporalResnetBlock of the decoder
	logvarMin   = -30.0           // DiagonalGaussianDistribution clamp
	logvarMax   = 20.0
)

// conv2d is torch.nn.Conv2d(cin, cout, k) with bias, reading <name>.weight and <name>.bias.
func conv2d(s nn.Scope, g *Graph, x *Node, name string, cin, cout, k int, o nn.ConvOpts) *Node {
	w := s.Param(g, name+".weight", cout, cin, k, k)
	b := s.Param(g, name+".bias", cout)
	if x == nil {
		return nil
	}
	return nn.Conv2D(x, w, b, o)
}

// groupNorm is torch.nn.GroupNorm(32, c, eps) reading <name>.weight and <name>.bias.
func groupNorm(s nn.Scope, g *Graph, x *Node, name string, c int, eps float64) *Node {
	w := s.Param(g, name+".weight", c)
	b := s.Param(g, name+".bias", c)
	if x == nil {
		return nil
	}
	return nn.GroupNorm(x, w, b, groups, eps)
}

// groupNormSiLU is groupNorm followed by SiLU (one fused op with vdpp's CPU kernels).
func groupNormSiLU(s nn.Scope, g *Graph, x *Node, name string, c int, eps float64) *Node {
	w := s.Param(g, name+".weight", c)
	b := s.Param(g, name+".bias", c)
	if x == nil {
		return nil
	}
	return nn.GroupNormSiLU(x, w, b, groups, eps)
}

// linear is torch.nn.Linear(in, out) with bias reading <name>.weight and <name>.bias.
func linear(s nn.Scope, g *Graph, x *Node, name string, in, out int) *Node {
	w := s.Param(g, name+".weight", out, in)
	b := s.Param(g, name+".bias", out)
	if x == nil {
		return nil
	}
	return nn.Linear(x, w, b)
}

// resnet2D is diffusers' ResnetBlock2D without time embedding (eps 1e-6, 32 groups,
// output_scale_factor 1): x [N, cin, H, W] -> [N, cout, H, W].
func resnet2D(s nn.Scope, g *Graph, x *Node, cin, cout int) *Node {
	h := groupNormSiLU(s, g, x, "norm1", cin, spatialEps)
	h = conv2d(s, g, h, "conv1", cin, cout, 3, nn.ConvOpts{Padding: 1})
	h = groupNormSiLU(s, g, h, "norm2", cout, spatialEps)
	h = conv2d(s, g, h, "conv2", cout, cout, 3, nn.ConvOpts{Padding: 1})
	short := x
	if cin != cout {
		short = conv2d(s, g, x, "conv_shortcut", cin, cout, 1, nn.ConvOpts{})
	}
	if x == nil {
		return nil
	}
	return Add(short, h)
}

// temporalResnet is diffusers' TemporalResnetBlock without time embedding on
// x [B, c, T, H, W]: GroupNorm, SiLU and Conv3d (3, 1, 1) twice, plus the residual.
func temporalResnet(s nn.Scope, g *Graph, x *Node, c int) *Node {
	n1w, n1b := s.Param(g, "norm1.weight", c), s.Param(g, "norm1.bias", c)
	c1w, c1b := s.Param(g, "conv1.weight", c, c, 3, 1, 1), s.Param(g, "conv1.bias", c)
	n2w, n2b := s.Param(g, "norm2.weight", c), s.Param(g, "norm2.bias", c)
	c2w, c2b := s.Param(g, "conv2.weight", c, c, 3, 1, 1), s.Param(g, "conv2.bias", c)
	if x == nil {
		return nil
	}
	h := nn.GroupNormSiLU(x, n1w, n1b, groups, temporalEps)
	h = nn.Conv3DTime(h, c1w, c1b)
	h = nn.GroupNormSiLU(h, n2w, n2b, groups, temporalEps)
	h = nn.Conv3DTime(h, c2w, c2b)
	return Add(x, h)
}

// spatioTemporalResnet is diffusers' SpatioTemporalResBlock as the temporal decoder builds
// it (no temb, merge_strategy "learned", switch_spatial_to_temporal_mix=True) on
// x [B·T, cin, H, W] holding B videos of frames consecutive frames:
//
//	s = ResnetBlock2D(x); t = TemporalResnetBlock(s as [B, C, T, H, W])
//	a = 1 − σ(mix_factor); out = a·s + (1 − a)·t
//
// (the reference's own order of operations, so that out ≈ (1−σ)·s + σ·t in fp32).
func spatioTemporalResnet(s nn.Scope, g *Graph, x *Node, frames, cin, cout int) *Node {
	h := resnet2D(s.In("spatial_res_block"), g, x, cin, cout)
	var mix *Node
	if h != nil {
		d := h.Shape().Dimensions
		bt, c, hh, ww := d[0], d[1], d[2], d[3]
		mix = TransposeAllAxes(Reshape(h, bt/frames, frames, c, hh, ww), 0, 2, 1, 3, 4)
	}
	t := temporalResnet(s.In("temporal_res_block"), g, mix, cout)
	m := s.In("time_mixer").Param(g, "mix_factor", 1)
	if x == nil {
		return nil
	}
	alpha := OneMinus(Logistic(m))                       // [1]
	alpha = Reshape(alpha, 1, 1, 1, 1, 1)                // broadcast
	out := Add(Mul(alpha, mix), Mul(OneMinus(alpha), t)) // [B, C, T, H, W]
	out = TransposeAllAxes(out, 0, 2, 1, 3, 4)           // [B, T, C, H, W]
	return Reshape(out, h.Shape().Dimensions...)
}

// attention is diffusers' Attention as the VAE mid blocks build it: one head of dim c,
// GroupNorm(32, c, eps 1e-6) pre-norm, q/k/v/out projections with bias, residual
// connection, rescale_output_factor 1; it attends over the H·W positions of each image of
// x [N, c, H, W].
func attention(s nn.Scope, g *Graph, x *Node, c int) *Node {
	hn := groupNorm(s, g, x, "group_norm", c, spatialEps)
	var seq *Node
	if x != nil {
		d := x.Shape().Dimensions
		seq = TransposeAllAxes(Reshape(hn, d[0], c, d[2]*d[3]), 0, 2, 1) // [N, HW, c]
	}
	q := linear(s, g, seq, "to_q", c, c)
	k := linear(s, g, seq, "to_k", c, c)
	v := linear(s, g, seq, "to_v", c, c)
	var a *Node
	if x != nil {
		a = nn.Attention(q, k, v, 1)
	}
	o := linear(s, g, a, "to_out.0", c, c)
	if x == nil {
		return nil
	}
	o = Reshape(TransposeAllAxes(o, 0, 2, 1), x.Shape().Dimensions...)
	return Add(o, x)
}

// downsample is Downsample2D(use_conv, padding=0): pad right and bottom by one zero, then
// a 3×3 stride-2 convolution ("conv").
func downsample(s nn.Scope, g *Graph, x *Node, c int) *Node {
	return conv2d(s, g, x, "conv", c, c, 3, nn.ConvOpts{Stride: 2, Pads: [][2]int{{0, 1}, {0, 1}}})
}

// upsample is Upsample2D(use_conv): nearest ×2, then a 3×3 convolution ("conv").
func upsample(s nn.Scope, g *Graph, x *Node, c int) *Node {
	if x != nil {
		x = nn.UpsampleNearest2x(x)
	}
	return conv2d(s, g, x, "conv", c, c, 3, nn.ConvOpts{Padding: 1})
}
