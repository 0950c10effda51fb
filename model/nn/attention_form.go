package nn

import (
	"github.com/gomlx/gomlx/backends"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import
)

// Score budgets of AttentionChunkFor: the most bytes one block of attention scores
// [batch·heads, chunk, Sk] may take. simplego runs on the host and shares memory with
// every other tensor; XLA on a GPU has more room, but the SVD-XT spatial self-attention at
// 576x1024 (72x128 = 9216 tokens, 2x25 frames, 5 heads) would need about 85 GB of fp32
// scores unchunked.
var (
	SimpleGoScoreBudget int64 = 256 << 20
	XLAScoreBudget      int64 = 4 << 30
)

// AttentionChunkFor is the one place that decides how attention is blocked on a backend:
// the query chunk for AttentionChunked so that one block of scores
// [batchHeads, chunk, sk] of bytesPerElem-byte elements stays within the backend's budget
// (SimpleGoScoreBudget on simplego, XLAScoreBudget elsewhere). It returns 0 (no chunking)
// when the whole [batchHeads, sq, sk] block fits, and at least 1 otherwise.
func AttentionChunkFor(b backends.Backend, batchHeads, sq, sk, bytesPerElem int) int {
	budget := XLAScoreBudget
	if b != nil && IsSimpleGo(b) {
		budget = SimpleGoScoreBudget
	}
	return attentionChunk(budget, batchHeads, sq, sk, bytesPerElem)
}

// attentionChunk is AttentionChunkFor for a given budget.
func attentionChunk(budget int64, batchHeads, sq, sk, bytesPerElem int) int {
	row := int64(batchHeads) * int64(sk) * int64(max(bytesPerElem, 1))
	if row <= 0 || int64(sq)*row <= budget {
		return 0
	}
	return int(max(budget/row, 1))
}

// AttentionAuto is multi-head attention blocked as AttentionChunkFor decides for the
// graph's backend and q's dtype: the form network code should call. With vdpp's CPU kernels
// it is the fused Attention, which keeps its blocks of scores in cache itself.
func AttentionAuto(q, k, v *Node, heads int) *Node {
	if useKernels(q.Graph(), q.DType()) {
		return Attention(q, k, v, heads) // the fused kernel blocks its scores itself
	}
	b, sq, sk := q.Shape().Dim(0), q.Shape().Dim(1), k.Shape().Dim(1)
	chunk := AttentionChunkFor(q.Graph().Backend(), b*heads, sq, sk, q.DType().Size())
	if GradientSafe(q.Graph()) {
		chunk = 0 // a forward Slice has no gradient on simplego
	}
	return AttentionChunked(q, k, v, heads, chunk)
}
