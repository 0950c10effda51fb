package nn

import (
	"fmt"
	"math"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import
)

// Linear computes x·wᵀ + b like torch.nn.Linear: x [..., in], w [out, in], b [out] or nil;
// the result is [..., out]. With vdpp's CPU kernels it is one fused op (the bias added
// while each block of the product is in cache).
func Linear(x, w, b *Node) *Node { return LinearAct(x, w, b, ActNone) }

// Activation is an elementwise function applied to a Linear's result.
type Activation int

// The activations of LinearAct: none, exact GELU, GELU with the tanh approximation, SiLU.
const (
	ActNone Activation = iota
	ActGELU
	ActGELUTanh
	ActSiLU
)

// LinearAct is act(Linear(x, w, b)); with vdpp's CPU kernels the activation is applied in
// the fused product's epilogue.
func LinearAct(x, w, b *Node, act Activation) *Node {
	checkLinear(x, w, b, 1)
	if y, ok := fusedLinear(x, w, b, act, false); ok {
		return y
	}
	return activation(linearPlain(x, w, b), act)
}

// checkLinear panics unless x [..., in], w [mult·n, in] and b nil or [mult·n] fit.
func checkLinear(x, w, b *Node, mult int) {
	if w.Rank() != 2 || x.Shape().Dim(-1) != w.Shape().Dim(1) || w.Shape().Dim(0)%mult != 0 ||
		(b != nil && (b.Rank() != 1 || b.Shape().Dim(0) != w.Shape().Dim(0))) {
		panic(fmt.Errorf("nn: Linear: x %v, weight %v and bias do not match", x.Shape(), w.Shape()))
	}
}

// activation applies act as graph ops.
func activation(x *Node, act Activation) *Node {
	switch act {
	case ActGELU:
		return GELU(x)
	case ActGELUTanh:
		return GELUTanh(x)
	case ActSiLU:
		return SiLU(x)
	}
	return x
}

// linearPlain is Linear as graph ops.
func linearPlain(x, w, b *Node) *Node {
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

// GELUTanh is torch's GELU(approximate="tanh"): 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
func GELUTanh(x *Node) *Node {
	inner := MulScalar(Add(x, MulScalar(Mul(Mul(x, x), x), 0.044715)), math.Sqrt(2/math.Pi))
	return Mul(MulScalar(x, 0.5), OnePlus(Tanh(inner)))
}

// GEGLU is diffusers' GEGLU feed-forward input: h = Linear(x, w, b) split in two halves
// [hidden, gate] along the last axis, result hidden·GELU(gate) of size out/2. With vdpp's
// CPU kernels it is one fused op.
func GEGLU(x, w, b *Node) *Node {
	if w.Shape().Dim(0)%2 != 0 {
		panic(fmt.Errorf("nn: GEGLU: projection size %d is odd", w.Shape().Dim(0)))
	}
	checkLinear(x, w, b, 2)
	if y, ok := fusedLinear(x, w, b, ActNone, true); ok {
		return y
	}
	hidden, gate := SplitHalves(linearPlain(x, w, b))
	return Mul(hidden, GELU(gate))
}
