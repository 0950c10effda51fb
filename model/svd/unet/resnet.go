package unet

import (
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import

	"github.com/vdpp/vdpp/model/nn"
)

// frames is the batch layout of the flattened [B·T, ...] activations: b videos of t frames.
type frames struct{ b, t int }

// groups is the GroupNorm group count of every norm in the network.
const groups = GroupNormGroups

// spatioTemporalResBlock is diffusers' SpatioTemporalResBlock (`…resnets.N`):
// x [B·T, Cin, h, w], temb [B·T, E] -> [B·T, cout, h, w]. A 2D resnet per frame, then a
// temporal resnet across frames, blended with alpha = sigmoid(mix_factor) on the spatial
// branch.
func spatioTemporalResBlock(s nn.Scope, x, temb *Node, f frames, cout int, eps float64) *Node {
	hs := resnetBlock2D(s.In("spatial_res_block"), x, temb, cout, eps)
	d := hs.Shape().Dimensions // [B·T, C, h, w]
	xs := TransposeAllAxes(Reshape(hs, f.b, f.t, d[1], d[2], d[3]), 0, 2, 1, 3, 4)
	ht := temporalResnetBlock(s.In("temporal_res_block"), xs, Reshape(temb, f.b, f.t, -1), eps)
	out := alphaBlend(s.In("time_mixer"), xs, ht)
	return Reshape(TransposeAllAxes(out, 0, 2, 1, 3, 4), d...)
}

// resnetBlock2D is diffusers' ResnetBlock2D with a time embedding (output_scale_factor 1,
// no up/down sampling): x [N, Cin, h, w], temb [N, E] -> [N, cout, h, w].
func resnetBlock2D(s nn.Scope, x, temb *Node, cout int, eps float64) *Node {
	g := x.Graph()
	cin := x.Shape().Dim(1)
	e := temb.Shape().Dim(-1)
	h := nn.GroupNormSiLU(x, s.Param(g, "norm1.weight", cin), s.Param(g, "norm1.bias", cin), groups, eps)
	h = nn.Conv2D(h, s.Param(g, "conv1.weight", cout, cin, 3, 3), s.Param(g, "conv1.bias", cout), nn.ConvOpts{Padding: 1})
	t := nn.Linear(nn.SiLU(temb), s.Param(g, "time_emb_proj.weight", cout, e), s.Param(g, "time_emb_proj.bias", cout))
	h = Add(h, InsertAxes(t, -1, -1))
	h = nn.GroupNormSiLU(h, s.Param(g, "norm2.weight", cout), s.Param(g, "norm2.bias", cout), groups, eps)
	h = nn.Conv2D(h, s.Param(g, "conv2.weight", cout, cout, 3, 3), s.Param(g, "conv2.bias", cout), nn.ConvOpts{Padding: 1})
	if cin != cout {
		x = nn.Conv2D(x, s.Param(g, "conv_shortcut.weight", cout, cin, 1, 1), s.Param(g, "conv_shortcut.bias", cout), nn.ConvOpts{})
	}
	return Add(x, h)
}

// temporalResnetBlock is diffusers' TemporalResnetBlock with in = out channels:
// x [B, C, T, h, w], temb [B, T, E] -> [B, C, T, h, w]; its convolutions have kernel
// (3, 1, 1), so it mixes frames only. Its norms take their statistics frame by frame
// (nn.GroupNormFramesSiLU), so that ForwardFrames, whose members hold different frames,
// gives the same bits.
func temporalResnetBlock(s nn.Scope, x, temb *Node, eps float64) *Node {
	g := x.Graph()
	c := x.Shape().Dim(1)
	h := nn.GroupNormFramesSiLU(x, s.Param(g, "norm1.weight", c), s.Param(g, "norm1.bias", c), groups, eps)
	h = nn.Conv3DTime(h, s.Param(g, "conv1.weight", c, c, 3, 1, 1), s.Param(g, "conv1.bias", c))
	h = addTimeEmbedding(s, h, temb)
	h = nn.GroupNormFramesSiLU(h, s.Param(g, "norm2.weight", c), s.Param(g, "norm2.bias", c), groups, eps)
	h = nn.Conv3DTime(h, s.Param(g, "conv2.weight", c, c, 3, 1, 1), s.Param(g, "conv2.bias", c))
	return Add(x, h)
}

// addTimeEmbedding adds a TemporalResnetBlock's time_emb_proj of temb [B, T, E] to
// h [B, C, T, h, w].
func addTimeEmbedding(s nn.Scope, h, temb *Node) *Node {
	g := h.Graph()
	c, e := h.Shape().Dim(1), temb.Shape().Dim(-1)
	t := nn.Linear(nn.SiLU(temb), s.Param(g, "time_emb_proj.weight", c, e), s.Param(g, "time_emb_proj.bias", c)) // [B, T, C]
	return Add(h, InsertAxes(TransposeAllAxes(t, 0, 2, 1), -1, -1))
}

// alphaBlend is the UNet's AlphaBlender ("learned_with_images", image_only_indicator all
// zero): alpha = sigmoid(mix_factor), result alpha·spatial + (1−alpha)·temporal.
func alphaBlend(s nn.Scope, spatial, temporal *Node) *Node {
	alpha := Reshape(Logistic(s.Param(spatial.Graph(), "mix_factor", 1))) // scalar
	return Add(Mul(alpha, spatial), Mul(OneMinus(alpha), temporal))
}
