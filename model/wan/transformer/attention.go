package transformer

import (
	"math"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import

	"github.com/vdpp/vdpp/model/nn"
)

// attend is multi-head softmax(q·kᵀ/√d)·v for q [B, Sq, H·d], k and v [B, Sk, H·d], the
// exact scaled_dot_product_attention of the reference, blocked over queries as
// nn.AttentionChunkFor decides for the backend. It differs from nn.Attention only in
// where the softmax's division happens: exp(s − max) is multiplied by v first and the
// [B, H, Sq, d] result is divided by the row sums, instead of dividing the [B, H, Sq, Sk]
// probabilities (Sk/d times more elements; on the pure-Go backend this division was ~8% of
// a Wan transformer call). The results agree to float32 rounding.
func attend(q, k, v *Node, heads int) *Node {
	if out, ok := nn.FusedAttention(q, k, v, nil, heads, 1/math.Sqrt(float64(q.Shape().Dim(2)/heads))); ok {
		return out // the same order of operations, as one op over all cores
	}
	b, sq, sk := q.Shape().Dim(0), q.Shape().Dim(1), k.Shape().Dim(1)
	chunk := nn.AttentionChunkFor(q.Graph().Backend(), b*heads, sq, sk, q.DType().Size())
	if chunk <= 0 || chunk >= sq {
		return attendBlock(q, k, v, heads)
	}
	parts := make([]*Node, 0, (sq+chunk-1)/chunk)
	for s := 0; s < sq; s += chunk {
		parts = append(parts, attendBlock(SliceAxis(q, 1, AxisRange(s, min(s+chunk, sq))), k, v, heads))
	}
	return Concatenate(parts, 1)
}

// attendBlock is attend on one block of queries.
func attendBlock(q, k, v *Node, heads int) *Node {
	b, sq, dm := q.Shape().Dim(0), q.Shape().Dim(1), q.Shape().Dim(2)
	sk := k.Shape().Dim(1)
	d := dm / heads
	qh := Reshape(MulScalar(q, 1/math.Sqrt(float64(d))), b, sq, heads, d)
	kh := Reshape(k, b, sk, heads, d)
	vh := Reshape(v, b, sk, heads, d)
	scores := DotGeneral(qh, []int{3}, []int{0, 2}, kh, []int{3}, []int{0, 2}) // [B, H, Sq, Sk]
	p := Exp(Sub(scores, StopGradient(ReduceAndKeep(scores, ReduceMax, -1))))
	sum := ReduceAndKeep(p, ReduceSum, -1)                                 // [B, H, Sq, 1]
	out := DotGeneral(p, []int{3}, []int{0, 1}, vh, []int{1}, []int{0, 2}) // [B, H, Sq, d]
	out = Div(out, sum)
	return Reshape(TransposeAllAxes(out, 0, 2, 1, 3), b, sq, dm)
}
