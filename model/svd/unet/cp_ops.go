package unet

import (
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import
	"github.com/vdpp/vdpp/model/nn"
)

// Graph pieces of the context-parallel forward. Activations of the frame split are
// [B·Tl, C, h, w] (Tl = the member's frame count); the row count B is read from the time
// embedding emb [B, E].

// framesPerRow returns Tl for x [B·Tl, ...] and emb [B, E].
func framesPerRow(x, emb *Node) (b, tl int) {
	b = emb.Shape().Dim(0)
	return b, x.Shape().Dim(0) / b
}

// cpSpatialRes is the spatial half of a SpatioTemporalResBlock (s is the block's scope):
// the ResnetBlock2D output hs [B·Tl, C, h, w].
func cpSpatialRes(s nn.Scope, x, emb *Node, cout int, eps float64) *Node {
	_, tl := framesPerRow(x, emb)
	return resnetBlock2D(s.In("spatial_res_block"), x, repeatInterleave(emb, tl), cout, eps)
}

// temporalConv is norm + SiLU + the (3, 1, 1) convolution of a TemporalResnetBlock over a
// member's frames x [B, Tl, C, h, w] with the neighbouring frames prev and next
// [B, C, h, w]: the norm applies the statistics gn [B, G, 2] of all frames (the exchange
// computes them as GroupNormFramesSiLU does, so the values have its bits), and edge [2]
// zeroes a neighbour at the ends of the video (the convolution's zero padding). It returns
// [B, C, Tl, h, w].
func temporalConv(s nn.Scope, norm, conv string, x, gn, prev, next, edge *Node) *Node {
	g := x.Graph()
	d := x.Shape().Dimensions
	b, c, hh, ww := d[0], d[2], d[3], d[4]
	gamma, beta := s.Param(g, norm+".weight", c), s.Param(g, norm+".bias", c)
	act := func(v *Node) *Node { return nn.GroupNormApply(v, gn, gamma, beta, groups, true) }
	edgeAt := func(i int) *Node { return Reshape(Slice(edge, AxisElem(i))) }
	p := Mul(act(Reshape(prev, b, 1, c, hh, ww)), edgeAt(0))
	n := Mul(act(Reshape(next, b, 1, c, hh, ww)), edgeAt(1))
	ext := TransposeAllAxes(Concatenate([]*Node{p, act(x), n}, 1), 0, 2, 1, 3, 4) // [B, C, Tl+2, h, w]
	return nn.Conv3D(ext, s.Param(g, conv+".weight", c, c, 3, 1, 1), s.Param(g, conv+".bias", c), nn.ConvOpts{})
}

// cpTemporalConv1 is the first half of the TemporalResnetBlock (s is the
// SpatioTemporalResBlock's scope): norm1 with the global statistics gn, SiLU, conv1 and
// the time embedding; th [B·Tl, C, h, w].
func cpTemporalConv1(s nn.Scope, x, gn, prev, next, edge, emb *Node) *Node {
	b, tl := framesPerRow(x, emb)
	ts := s.In("temporal_res_block")
	d := x.Shape().Dimensions
	c, hh, ww := d[1], d[2], d[3]
	h := temporalConv(ts, "norm1", "conv1", Reshape(x, b, tl, c, hh, ww), gn, prev, next, edge) // [B, C, Tl, h, w]
	h = addTimeEmbedding(ts, h, Reshape(repeatInterleave(emb, tl), b, tl, -1))
	return Reshape(TransposeAllAxes(h, 0, 2, 1, 3, 4), d...)
}

// cpTemporalConv2 finishes the SpatioTemporalResBlock: norm2 with the global statistics,
// SiLU, conv2, the residual, and the time mixer between x (the spatial output) and the
// temporal output.
func cpTemporalConv2(s nn.Scope, x, th, gn, prev, next, edge *Node) *Node {
	d := x.Shape().Dimensions
	b := gn.Shape().Dim(0)
	tl := d[0] / b
	c, hh, ww := d[1], d[2], d[3]
	ts := s.In("temporal_res_block")
	h := temporalConv(ts, "norm2", "conv2", Reshape(th, b, tl, c, hh, ww), gn, prev, next, edge) // [B, C, Tl, h, w]
	xs := TransposeAllAxes(Reshape(x, b, tl, c, hh, ww), 0, 2, 1, 3, 4)
	out := alphaBlend(s.In("time_mixer"), xs, Add(xs, h))
	return Reshape(TransposeAllAxes(out, 0, 2, 1, 3, 4), d...)
}

// cpTemporalTransformer is layer l's temporal half on the spatial split: tokens
// [B, T, Sm, C] of all T frames at Sm positions, the frame position embedding (frame
// indices 0..T-1), the TemporalBasicTransformerBlock and the time mixer.
func cpTemporalTransformer(s nn.Scope, tok, ehs *Node, l int, a attnSpec) *Node {
	d := tok.Shape().Dimensions
	f := frames{b: d[0], t: d[1]}
	pe := framePositions(s, tok.Graph(), f, d[3])
	return Reshape(temporalLayer(s, Reshape(tok, f.b*f.t, d[2], d[3]), pe, ehs, f, l, a), d...)
}
