package nn

import (
	"fmt"
	"math"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import
)

// Linear computes x·wᵀ + b like torch.nn.Linear: x [..., in], w [out, in], b [out] or nil;
// the result is [..., out].
func Linear(x, w, b *Node) *Node {
	if w.Rank() != 2 || x.Shape().Dim(-1) != w.Shape().Dim(1) {
		panic(fmt.Errorf("nn: Linear: x %v and weight %v do not match", x.Shape(), w.Shape()))
	}
	dims := x.Shape().Dimensions
	in, out := dims[len(dims)-1], w.Shape().Dim(0)
	y := MatMulNT(Reshape(x, -1, in), w)
	y = Reshape(y, append(dims[:len(dims)-1:len(dims)-1], out)...)
	if b != nil {
		y = Add(y, ExpandLeftToRank(b, y.Rank()))
	}
	return y
}

// SiLU is x·sigmoid(x) (torch.nn.functional.silu).
func SiLU(x *Node) *Node { return Mul(x, Logistic(x)) }

// GELU is the exact (erf) GELU, 0.5·x·(1 + erf(x/√2)), torch's default approximate="none".
func GELU(x *Node) *Node {
	return Mul(MulScalar(x, 0.5), OnePlus(Erf(MulScalar(x, 1/math.Sqrt2))))
}

// GEGLU is diffusers' GEGLU feed-forward input: h = Linear(x, w, b) split in two halves
// [hidden, gate] along the last axis, result hidden·GELU(gate) of size out/2.
func GEGLU(x, w, b *Node) *Node {
	h := Linear(x, w, b)
	n := h.Shape().Dim(-1)
	if n%2 != 0 {
		panic(fmt.Errorf("nn: GEGLU: projection size %d is odd", n))
	}
	hidden, gate := SplitHalves(h)
	return Mul(hidden, GELU(gate))
}
