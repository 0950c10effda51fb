package nn

import (
	"fmt"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import
)

// GroupNorm normalises x [N, C, ...] like torch.nn.GroupNorm: the channels are split into
// groups of C/groups consecutive channels, each (row, group) is normalised with its mean
// and biased variance over the group's channels and all trailing axes,
// (x−mean)/√(var+eps), then scaled per channel by gamma [C] and shifted by beta [C]
// (either may be nil for affine=False).
func GroupNorm(x, gamma, beta *Node, groups int, eps float64) *Node {
	if x.Rank() < 2 {
		panic(fmt.Errorf("nn: GroupNorm: input %v has rank < 2", x.Shape()))
	}
	dims := x.Shape().Dimensions
	n, c := dims[0], dims[1]
	if groups <= 0 || c%groups != 0 {
		panic(fmt.Errorf("nn: GroupNorm: %d channels not divisible into %d groups", c, groups))
	}
	xg := Reshape(x, n, groups, -1)
	y := Reshape(normalizeLastAxis(xg, eps), dims...)
	return affinePerChannel(y, gamma, beta, 1)
}

// LayerNorm normalises x over its last axis like torch.nn.LayerNorm(dim): (x−mean)/√(var+eps)
// with the biased variance, times gamma [dim] plus beta [dim] (either may be nil).
func LayerNorm(x, gamma, beta *Node, eps float64) *Node {
	return affinePerChannel(normalizeLastAxis(x, eps), gamma, beta, x.Rank()-1)
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

// affinePerChannel multiplies by gamma and adds beta, both [C] broadcast along axis.
func affinePerChannel(x, gamma, beta *Node, axis int) *Node {
	bc := func(p *Node) *Node {
		if p.Rank() != 1 || p.Shape().Dim(0) != x.Shape().Dim(axis) {
			panic(fmt.Errorf("nn: norm parameter %v does not match axis %d of %v", p.Shape(), axis, x.Shape()))
		}
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
