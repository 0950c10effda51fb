package nn

import (
	"fmt"
	"math"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import
)

// GroupNorm normalises x [N, C, ...] like torch.nn.GroupNorm: the channels are split into
// groups of C/groups consecutive channels, each (row, group) is normalised with its mean
// and biased variance over the group's channels and all trailing axes,
// (x−mean)/√(var+eps), then scaled per channel by gamma [C] and shifted by beta [C]
// (either may be nil for affine=False). With vdpp's CPU kernels it is one fused op.
func GroupNorm(x, gamma, beta *Node, groups int, eps float64) *Node {
	return groupNorm(x, gamma, beta, groups, eps, false)
}

// GroupNormSiLU is SiLU(GroupNorm(x, gamma, beta, groups, eps)), the pair every resnet
// block of the UNet and the VAEs starts its branches with; one fused op with vdpp's CPU
// kernels.
func GroupNormSiLU(x, gamma, beta *Node, groups int, eps float64) *Node {
	return groupNorm(x, gamma, beta, groups, eps, true)
}

// GroupNormFramesSiLU is GroupNormSiLU on a video x [N, C, T, ...] whose statistics the
// fused op takes frame by frame (kernels.GroupNormShape.Parts = T): the same values to
// rounding, and the bits a context-parallel member gets from its frames' statistics
// (GroupNormApply with the statistics gathered frame by frame). Elsewhere it is
// GroupNormSiLU.
func GroupNormFramesSiLU(x, gamma, beta *Node, groups int, eps float64) *Node {
	if x.Rank() < 3 {
		panic(fmt.Errorf("nn: GroupNormFramesSiLU: input %v is not [N, C, T, ...]", x.Shape()))
	}
	return groupNormParts(x, gamma, beta, groups, x.Shape().Dim(2), eps, true)
}

func groupNorm(x, gamma, beta *Node, groups int, eps float64, silu bool) *Node {
	return groupNormParts(x, gamma, beta, groups, 1, eps, silu)
}

// GroupNormApply is the second step of a GroupNorm whose statistics are given: v
// [N, F, C, ...] (F frames of C channels), stats [N, groups, 2] the mean and 1/√(var + eps)
// of each row and group; it returns (v − mean)·inv·gamma + beta (gamma, beta [C] or nil),
// then SiLU if silu. With vdpp's CPU kernels it is one fused op with GroupNorm's
// arithmetic (kernels.GroupAffine), so statistics equal to a GroupNorm's give its bits.
func GroupNormApply(v, stats, gamma, beta *Node, groups int, silu bool) *Node {
	d := v.Shape().Dimensions
	if len(d) < 3 {
		panic(fmt.Errorf("nn: GroupNormApply: input %v is not [N, F, C, ...]", v.Shape()))
	}
	n, f, c := d[0], d[1], d[2]
	if groups <= 0 || c%groups != 0 || !stats.Shape().Equal(F32(n, groups, 2)) {
		panic(fmt.Errorf("nn: GroupNormApply: input %v, statistics %v, %d groups", v.Shape(), stats.Shape(), groups))
	}
	checkChannelParam(gamma, c, v)
	checkChannelParam(beta, c, v)
	if y, ok := fusedGroupAffine(v, stats, gamma, beta, groups, silu); ok {
		return y
	}
	vg := Reshape(v, n, f, groups, -1)
	mean := Reshape(Slice(stats, AxisRange(), AxisRange(), AxisElem(0)), n, 1, groups, 1)
	inv := Reshape(Slice(stats, AxisRange(), AxisRange(), AxisElem(1)), n, 1, groups, 1)
	y := Reshape(Mul(Sub(vg, mean), inv), d...)
	bc := make([]int, len(d))
	for i := range bc {
		bc[i] = 1
	}
	bc[2] = c
	if gamma != nil {
		y = Mul(y, Reshape(gamma, bc...))
	}
	if beta != nil {
		y = Add(y, Reshape(beta, bc...))
	}
	if silu {
		y = SiLU(y)
	}
	return y
}

func groupNormParts(x, gamma, beta *Node, groups, parts int, eps float64, silu bool) *Node {
	if x.Rank() < 2 {
		panic(fmt.Errorf("nn: GroupNorm: input %v has rank < 2", x.Shape()))
	}
	dims := x.Shape().Dimensions
	n, c := dims[0], dims[1]
	if groups <= 0 || c%groups != 0 {
		panic(fmt.Errorf("nn: GroupNorm: %d channels not divisible into %d groups", c, groups))
	}
	checkChannelParam(gamma, c, x)
	checkChannelParam(beta, c, x)
	if y, ok := fusedGroupNorm(x, gamma, beta, groups, parts, eps, silu); ok {
		return y
	}
	xg := Reshape(x, n, groups, -1)
	y := Reshape(normalizeLastAxis(xg, eps), dims...)
	y = affinePerChannel(y, gamma, beta, 1)
	if silu {
		y = SiLU(y)
	}
	return y
}

// LayerNorm normalises x over its last axis like torch.nn.LayerNorm(dim): (x−mean)/√(var+eps)
// with the biased variance, times gamma [dim] plus beta [dim] (either may be nil). With
// vdpp's CPU kernels it is one fused op.
func LayerNorm(x, gamma, beta *Node, eps float64) *Node {
	checkChannelParam(gamma, x.Shape().Dim(-1), x)
	checkChannelParam(beta, x.Shape().Dim(-1), x)
	if y, ok := fusedRowNorm(x, gamma, beta, nil, nil, eps, false); ok {
		return y
	}
	return affinePerChannel(normalizeLastAxis(x, eps), gamma, beta, x.Rank()-1)
}

// LayerNormModulated is LayerNorm(x, gamma, beta, eps)·(1 + scale) + shift for x [B, S, D]
// and scale, shift [B or 1, S or 1, D]: the adaptive norm of DiT blocks (Wan's shift/scale
// modulation). With vdpp's CPU kernels it is one fused op.
func LayerNormModulated(x, gamma, beta, scale, shift *Node, eps float64) *Node {
	if y, ok := fusedRowNorm(x, gamma, beta, scale, shift, eps, false); ok {
		return y
	}
	return Add(Mul(LayerNorm(x, gamma, beta, eps), OnePlus(scale)), shift)
}

// RMSNorm is torch.nn.RMSNorm over the last axis: x / √(mean(x²) + eps) · weight [D]
// (weight may be nil). With vdpp's CPU kernels it is one fused op.
func RMSNorm(x, weight *Node, eps float64) *Node {
	checkChannelParam(weight, x.Shape().Dim(-1), x)
	if y, ok := fusedRowNorm(x, weight, nil, nil, nil, eps, true); ok {
		return y
	}
	ms := ReduceAndKeep(Square(x), ReduceMean, -1)
	y := Div(x, Sqrt(AddScalar(ms, eps)))
	if weight == nil {
		return y
	}
	return Mul(y, ExpandLeftToRank(weight, y.Rank()))
}

// ChannelL2Norm divides each position's channel vector of x [N, C, ...] by its L2 norm (at
// least eps) and multiplies by √C·gamma (gamma of C elements, any shape): Wan's VAE
// RMS norm, F.normalize(x, dim=1)·√C·gamma. With vdpp's CPU kernels it is one fused op.
func ChannelL2Norm(x, gamma *Node, eps float64) *Node { return channelL2Norm(x, gamma, eps, false) }

// ChannelL2NormSiLU is SiLU(ChannelL2Norm(x, gamma, eps)).
func ChannelL2NormSiLU(x, gamma *Node, eps float64) *Node { return channelL2Norm(x, gamma, eps, true) }

func channelL2Norm(x, gamma *Node, eps float64, silu bool) *Node {
	ch := x.Shape().Dim(1)
	if gamma.Shape().Size() != ch {
		panic(fmt.Errorf("nn: ChannelL2Norm: gamma %v for %d channels", gamma.Shape(), ch))
	}
	if y, ok := fusedChannelL2Norm(x, gamma, eps, silu); ok {
		return y
	}
	norm := Sqrt(ReduceAndKeep(Square(x), ReduceSum, 1))
	y := Div(x, Max(norm, Scalar(x.Graph(), x.DType(), eps)))
	shape := make([]int, x.Rank())
	for i := range shape {
		shape[i] = 1
	}
	shape[1] = ch
	y = Mul(MulScalar(y, math.Sqrt(float64(ch))), Reshape(gamma, shape...))
	if silu {
		y = SiLU(y)
	}
	return y
}

// normalizeLastAxis returns (x−mean)/√(var+eps) over the last axis, variance computed in
// two passes as the mean of squared deviations (as PyTorch's CPU kernels do, which avoids
// the cancellation of E[x²]−E[x]²).
func normalizeLastAxis(x *Node, eps float64) *Node {
	mean := ReduceAndKeep(x, ReduceMean, -1)
	d := Sub(x, mean)
	v := ReduceAndKeep(Square(d), ReduceMean, -1)
	return Div(d, Sqrt(AddScalar(v, eps)))
}

// checkChannelParam panics unless p is nil or a vector of c elements.
func checkChannelParam(p *Node, c int, x *Node) {
	if p != nil && (p.Rank() != 1 || p.Shape().Dim(0) != c) {
		panic(fmt.Errorf("nn: norm parameter %v does not match %d channels of %v", p.Shape(), c, x.Shape()))
	}
}

// affinePerChannel multiplies by gamma and adds beta, both [C] broadcast along axis.
func affinePerChannel(x, gamma, beta *Node, axis int) *Node {
	bc := func(p *Node) *Node {
		shape := make([]int, x.Rank())
		for i := range shape {
			shape[i] = 1
		}
		shape[axis] = p.Shape().Dim(0)
		return Reshape(p, shape...)
	}
	if gamma != nil {
		x = Mul(x, bc(gamma))
	}
	if beta != nil {
		x = Add(x, bc(beta))
	}
	return x
}
