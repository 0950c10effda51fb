package nn

import (
	"fmt"
	"math"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import
)

// Attention is multi-head scaled dot-product attention as diffusers' AttnProcessor2_0 runs
// it through torch's scaled_dot_product_attention (no mask, no dropout): q [B, Sq, H·d],
// k and v [B, Sk, H·d] are split into heads (head h owns features h·d..h·d+d−1),
// softmax(q·kᵀ/√d)·v is computed per head (max-subtracted softmax over the keys), and the
// heads are merged back to [B, Sq, H·d]. In an inference graph on a backend that runs
// vdpp's fused CPU ops (UsesKernels) it is one fused op (FusedAttention).
func Attention(q, k, v *Node, heads int) *Node {
	if q.Rank() != 3 || k.Rank() != 3 || v.Rank() != 3 {
		panic(fmt.Errorf("nn: Attention: q %v, k %v, v %v must be [B, S, H·d]", q.Shape(), k.Shape(), v.Shape()))
	}
	b, sq, dm := q.Shape().Dim(0), q.Shape().Dim(1), q.Shape().Dim(2)
	sk := k.Shape().Dim(1)
	if heads <= 0 || dm%heads != 0 || k.Shape().Dim(2) != dm || k.Shape().Dim(0) != b ||
		!v.Shape().Equal(k.Shape()) {
		panic(fmt.Errorf("nn: Attention: q %v, k %v, v %v with %d heads", q.Shape(), k.Shape(), v.Shape(), heads))
	}
	d := dm / heads
	if out, ok := FusedAttention(q, k, v, nil, heads, 1/math.Sqrt(float64(d))); ok {
		return out
	}
	qh := Reshape(MulScalar(q, 1/math.Sqrt(float64(d))), b, sq, heads, d)
	kh := Reshape(k, b, sk, heads, d)
	vh := Reshape(v, b, sk, heads, d)
	// scores [B, H, Sq, Sk]
	scores := DotGeneral(qh, []int{3}, []int{0, 2}, kh, []int{3}, []int{0, 2})
	p := Softmax(scores, -1)
	// out [B, H, Sq, d]
	out := DotGeneral(p, []int{3}, []int{0, 1}, vh, []int{1}, []int{0, 2})
	return Reshape(TransposeAllAxes(out, 0, 2, 1, 3), b, sq, dm)
}

// AttentionChunked computes Attention in blocks of at most chunk queries and concatenates
// the results, so at most [B, heads, chunk, Sk] scores exist per block instead of the full
// [B, heads, Sq, Sk] (the SVD UNet's spatial self-attention at 72×128 latents would need
// ~1.6 GB of scores per head and frame otherwise). chunk <= 0 or >= Sq is plain Attention.
// Every output element is computed by the same formula; the backend may still pick a
// different matmul blocking per block size, so results equal Attention's to fp32 rounding.
func AttentionChunked(q, k, v *Node, heads, chunk int) *Node {
	sq := q.Shape().Dim(1)
	if chunk <= 0 || chunk >= sq {
		return Attention(q, k, v, heads)
	}
	parts := make([]*Node, 0, (sq+chunk-1)/chunk)
	for s := 0; s < sq; s += chunk {
		qs := SliceAxis(q, 1, AxisRange(s, min(s+chunk, sq)))
		parts = append(parts, Attention(qs, k, v, heads))
	}
	return Concatenate(parts, 1)
}
