package unet

import (
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import

	"github.com/vdpp/vdpp/model/nn"
)

// layerNormEps is the eps of every LayerNorm of the transformer blocks (torch's default).
const layerNormEps = 1e-5

// transformerGroupNormEps is the eps of TransformerSpatioTemporalModel's input GroupNorm.
const transformerGroupNormEps = 1e-6

// attnSpec describes a TransformerSpatioTemporalModel: head count and width and the
// number of (spatial, temporal) layer pairs.
type attnSpec struct {
	heads, headDim, layers int
}

// transformerSpatioTemporal is diffusers' TransformerSpatioTemporalModel (`…attentions.N`):
// x [B·T, C, h, w] with ehs [B, S, D] -> [B·T, C, h, w]. diffusers hands it ehs repeated
// per frame ([B·T, S, D]) and gives its temporal blocks the copy of frame 0 repeated per
// pixel ([B·h·w, S, D]); both are the same per-video context, so it is passed once per
// video and crossAttention applies the repetition after the k/v projections.
func transformerSpatioTemporal(s nn.Scope, x, ehs *Node, f frames, a attnSpec) *Node {
	h := transformerIn(s, x, a)
	pe := framePositions(s, x.Graph(), f, x.Shape().Dim(1))
	for l := range a.layers {
		h = basicTransformerBlock(s.Inf("transformer_blocks.%d", l), h, ehs, a)
		h = temporalLayer(s, h, pe, ehs, f, l, a)
	}
	return transformerOut(s, h, x)
}

// transformerIn starts a TransformerSpatioTemporalModel: GroupNorm (per frame) of
// x [N, C, h, w], tokens [N, h·w, C], proj_in.
func transformerIn(s nn.Scope, x *Node, a attnSpec) *Node {
	g := x.Graph()
	d := x.Shape().Dimensions
	n, c, hh, ww := d[0], d[1], d[2], d[3]
	inner := a.heads * a.headDim
	h := nn.GroupNorm(x, s.Param(g, "norm.weight", c), s.Param(g, "norm.bias", c), groups, transformerGroupNormEps)
	h = Reshape(TransposeAllAxes(h, 0, 2, 3, 1), n, hh*ww, c)
	return nn.Linear(h, s.Param(g, "proj_in.weight", inner, c), s.Param(g, "proj_in.bias", inner))
}

// framePositions is the frame position embedding of f.t frames (indices 0..t-1), the same
// for every video: [B·T, 1, C].
func framePositions(s nn.Scope, g *Graph, f frames, c int) *Node {
	pos := make([]float32, f.t)
	for i := range pos {
		pos[i] = float32(i)
	}
	pe := nn.Timesteps(Const(g, pos), c, true, 0)
	pe = timestepEmbedding(s.In("time_pos_embed"), pe, 4*c, c)
	return Reshape(BroadcastToDims(InsertAxes(pe, 0), f.b, f.t, c), f.b*f.t, 1, c)
}

// temporalLayer is the temporal half of layer l: the TemporalBasicTransformerBlock on
// tokens h [B·T, S, C] plus the frame positions pe, mixed with h by the time mixer.
func temporalLayer(s nn.Scope, h, pe, ehs *Node, f frames, l int, a attnSpec) *Node {
	mix := temporalBasicTransformerBlock(s.Inf("temporal_transformer_blocks.%d", l), Add(h, pe), ehs, f, a)
	return alphaBlend(s.In("time_mixer"), h, mix)
}

// transformerOut ends a TransformerSpatioTemporalModel: proj_out of the tokens, back to
// the shape of the residual res [N, C, h, w], plus res.
func transformerOut(s nn.Scope, tok, res *Node) *Node {
	g := tok.Graph()
	d := res.Shape().Dimensions
	n, c, hh, ww := d[0], d[1], d[2], d[3]
	h := nn.Linear(tok, s.Param(g, "proj_out.weight", c, tok.Shape().Dim(-1)), s.Param(g, "proj_out.bias", c))
	h = TransposeAllAxes(Reshape(h, n, hh, ww, c), 0, 3, 1, 2)
	return Add(h, res)
}

// basicTransformerBlock is diffusers' BasicTransformerBlock (layer_norm, GEGLU): x [N, S, C]
// attends to itself, then to ctx [N', Sc, D] (N' divides N; row n uses context n / (N/N')),
// then goes through the feed-forward, each pre-normed and residual.
func basicTransformerBlock(s nn.Scope, x, ctx *Node, a attnSpec) *Node {
	x = Add(selfAttention(s.In("attn1"), layerNorm(s.In("norm1"), x), a), x)
	x = Add(crossAttention(s.In("attn2"), layerNorm(s.In("norm2"), x), ctx, a), x)
	return Add(feedForward(s.In("ff"), layerNorm(s.In("norm3"), x), x.Shape().Dim(-1)), x)
}

// temporalBasicTransformerBlock is diffusers' TemporalBasicTransformerBlock with
// time_mix_inner_dim = dim (so every stage is residual): x [B·T, S, C] is regrouped to
// [B·S, T, C] so that attention runs across frames; ctx [B, Sc, D] is the cross-attention
// context of each video.
func temporalBasicTransformerBlock(s nn.Scope, x, ctx *Node, f frames, a attnSpec) *Node {
	d := x.Shape().Dimensions
	bt, sl, c := d[0], d[1], d[2]
	h := Reshape(TransposeAllAxes(Reshape(x, f.b, f.t, sl, c), 0, 2, 1, 3), f.b*sl, f.t, c)
	h = Add(feedForward(s.In("ff_in"), layerNorm(s.In("norm_in"), h), c), h)
	h = Add(selfAttention(s.In("attn1"), layerNorm(s.In("norm1"), h), a), h)
	h = Add(crossAttention(s.In("attn2"), layerNorm(s.In("norm2"), h), ctx, a), h)
	h = Add(feedForward(s.In("ff"), layerNorm(s.In("norm3"), h), c), h)
	return Reshape(TransposeAllAxes(Reshape(h, f.b, sl, f.t, c), 0, 2, 1, 3), bt, sl, c)
}

// selfAttention is diffusers' Attention over x [N, S, C] itself (blocked by
// nn.AttentionAuto on large inputs): no q/k/v bias, to_out.0 with bias.
func selfAttention(s nn.Scope, x *Node, a attnSpec) *Node {
	g := x.Graph()
	c := x.Shape().Dim(-1)
	inner := a.heads * a.headDim
	q := nn.Linear(x, s.Param(g, "to_q.weight", inner, c), nil)
	k := nn.Linear(x, s.Param(g, "to_k.weight", inner, c), nil)
	v := nn.Linear(x, s.Param(g, "to_v.weight", inner, c), nil)
	o := nn.AttentionAuto(q, k, v, a.heads)
	return nn.Linear(o, s.Param(g, "to_out.0.weight", c, inner), s.Param(g, "to_out.0.bias", c))
}

// crossAttention is diffusers' Attention from x [N, S, C] to ctx [N', Sk, D], where N' divides
// N and x's row n attends to context row n / (N/N') (diffusers' repeat_interleave of the
// context, applied here after the k/v projections, which are per row). With a single
// context token the softmax is exactly 1, so the result is to_out(v) for every query, as
// diffusers computes it, and q·k is skipped.
func crossAttention(s nn.Scope, x, ctx *Node, a attnSpec) *Node {
	g := x.Graph()
	n, sq, c := x.Shape().Dim(0), x.Shape().Dim(1), x.Shape().Dim(2)
	nc, sk, d := ctx.Shape().Dim(0), ctx.Shape().Dim(1), ctx.Shape().Dim(2)
	r := n / nc
	inner := a.heads * a.headDim
	wq := s.Param(g, "to_q.weight", inner, c)
	k := nn.Linear(ctx, s.Param(g, "to_k.weight", inner, d), nil)
	v := nn.Linear(ctx, s.Param(g, "to_v.weight", inner, d), nil)
	wo, bo := s.Param(g, "to_out.0.weight", c, inner), s.Param(g, "to_out.0.bias", c)
	if sk == 1 {
		o := nn.Linear(v, wo, bo) // [N', 1, C]
		return Reshape(BroadcastToDims(InsertAxes(o, 1), nc, r, sq, c), n, sq, c)
	}
	q := nn.Linear(x, wq, nil)
	k = repeatInterleave(k, r)
	v = repeatInterleave(v, r)
	return nn.Linear(nn.AttentionAuto(q, k, v, a.heads), wo, bo)
}

// feedForward is diffusers' FeedForward with GEGLU and mult 4: x [..., C] -> [..., out].
func feedForward(s nn.Scope, x *Node, out int) *Node {
	g := x.Graph()
	c := x.Shape().Dim(-1)
	inner := 4 * c
	h := nn.GEGLU(x, s.Param(g, "net.0.proj.weight", 2*inner, c), s.Param(g, "net.0.proj.bias", 2*inner))
	return nn.Linear(h, s.Param(g, "net.2.weight", out, inner), s.Param(g, "net.2.bias", out))
}

// layerNorm is torch.nn.LayerNorm(C) with affine parameters, eps 1e-5.
func layerNorm(s nn.Scope, x *Node) *Node {
	g := x.Graph()
	c := x.Shape().Dim(-1)
	return nn.LayerNorm(x, s.Param(g, "weight", c), s.Param(g, "bias", c), layerNormEps)
}

// timestepEmbedding is diffusers' TimestepEmbedding: linear_1 (in -> hidden), SiLU,
// linear_2 (hidden -> out).
func timestepEmbedding(s nn.Scope, x *Node, hidden, out int) *Node {
	g := x.Graph()
	in := x.Shape().Dim(-1)
	h := nn.Linear(x, s.Param(g, "linear_1.weight", hidden, in), s.Param(g, "linear_1.bias", hidden))
	return nn.Linear(nn.SiLU(h), s.Param(g, "linear_2.weight", out, hidden), s.Param(g, "linear_2.bias", out))
}
