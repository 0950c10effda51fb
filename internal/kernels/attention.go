package kernels

import (
	"fmt"
	"sync"

	"github.com/vdpp/vdpp/internal/gemm"
	"github.com/vdpp/vdpp/internal/parallel"
)

// AttentionShape describes multi-head attention of q [B, Sq, H·D] over k and v [B, Sk, H·D]
// (head h owns features h·D .. h·D+D−1), with an optional additive score bias
// [BiasBatch, H, Sq, Sk] (BiasBatch 1: the same for every batch row; 0: no bias).
type AttentionShape struct {
	B, Sq, Sk, H, D int
	// Scale multiplies q before the product with k (1/√D for scaled dot-product
	// attention, 1 for T5's unscaled one).
	Scale float32
	// BiasBatch is the leading size of the bias: 0 (none), 1 or B.
	BiasBatch int
}

// Validate reports what is wrong with a.
func (a AttentionShape) Validate() error {
	if a.B <= 0 || a.Sq <= 0 || a.Sk <= 0 || a.H <= 0 || a.D <= 0 {
		return fmt.Errorf("kernels: attention sizes %+v must be positive", a)
	}
	if a.BiasBatch != 0 && a.BiasBatch != 1 && a.BiasBatch != a.B {
		return fmt.Errorf("kernels: attention bias batch %d is not 0, 1 or %d", a.BiasBatch, a.B)
	}
	return nil
}

// scoreBlockBytes bounds one block of scores [rows, Sk], so that it stays in the L2 cache
// while it is normalised and multiplied by v.
const scoreBlockBytes = 128 << 10

// queryBlock is the number of queries one unit of work handles: as many as keep a block
// of scores within scoreBlockBytes, a multiple of 8 between 8 and 64.
func queryBlock(sq, sk int) int {
	b := scoreBlockBytes / 4 / max(sk, 1)
	b = max(8, min(64, b/8*8))
	return min(b, sq)
}

// Attention sets out [B, Sq, H·D] to softmax(Scale·q·kᵀ + bias)·v per batch row and head:
// for each query, the scores of all keys are computed, the softmax's exponentials
// exp(s − max) (float32 Exp) are multiplied by v and the result divided by their sum (the
// order diffusers' Wan processor and torch's math attention use). Work is split over
// (batch row, head, block of queries); each unit holds its block of scores in cache.
func Attention(out, q, k, v, bias []float32, a AttentionShape) {
	if err := a.Validate(); err != nil {
		panic(err)
	}
	hd := a.H * a.D
	if len(q) < a.B*a.Sq*hd || len(k) < a.B*a.Sk*hd || len(v) < a.B*a.Sk*hd || len(out) < a.B*a.Sq*hd ||
		(a.BiasBatch > 0 && len(bias) < a.BiasBatch*a.H*a.Sq*a.Sk) {
		panic(fmt.Sprintf("kernels: attention %+v: slices too short", a))
	}
	bq := queryBlock(a.Sq, a.Sk)
	blocks := (a.Sq + bq - 1) / bq
	units := a.B * a.H * blocks
	// Grain: enough units that a goroutine has ~100k multiply-adds to do.
	work := 2 * bq * a.Sk * a.D
	parallel.For(units, max(1, 100_000/max(work, 1)), func(lo, hi int) {
		w := getAttnScratch(a, bq)
		defer attnScratch.Put(w)
		for u := lo; u < hi; u++ {
			bh, blk := u/blocks, u%blocks
			w.unit(out, q, k, v, bias, a, bh/a.H, bh%a.H, blk*bq, min(a.Sq, (blk+1)*bq))
		}
	})
}

// attnWork is one goroutine's scratch: k and v of the current (row, head) packed for
// gemm, the scaled queries, the scores and the output block.
type attnWork struct {
	kp, vp, qs, s, o []float32
	packed           [2]int // batch row and head packed in kp, vp; -1 when none
}

var attnScratch sync.Pool

func getAttnScratch(a AttentionShape, bq int) *attnWork {
	w, _ := attnScratch.Get().(*attnWork)
	if w == nil {
		w = &attnWork{}
	}
	grow := func(s []float32, n int) []float32 {
		if cap(s) < n {
			return make([]float32, n)
		}
		return s[:n]
	}
	w.kp = grow(w.kp, gemm.PackedLen(a.Sk, a.D))
	w.vp = grow(w.vp, gemm.PackedLen(a.D, a.Sk))
	w.qs = grow(w.qs, bq*a.D)
	w.s = grow(w.s, bq*a.Sk)
	w.o = grow(w.o, bq*a.D)
	w.packed = [2]int{-1, -1}
	return w
}

// unit computes queries i0..i1 of batch row b, head h.
func (w *attnWork) unit(out, q, k, v, bias []float32, a AttentionShape, b, h, i0, i1 int) {
	hd := a.H * a.D
	if w.packed != [2]int{b, h} {
		base := b*a.Sk*hd + h*a.D
		gemm.PackRows(w.kp, a.Sk, a.D, k[base:], hd)
		gemm.PackCols(w.vp, a.D, a.Sk, v[base:], hd)
		w.packed = [2]int{b, h}
	}
	rows := i1 - i0
	for i := range rows {
		src := q[(b*a.Sq+i0+i)*hd+h*a.D:]
		dst := w.qs[i*a.D : (i+1)*a.D]
		for j := range dst {
			dst[j] = src[j] * a.Scale
		}
	}
	s := w.s[:rows*a.Sk]
	gemm.MulPackedSerial(rows, a.Sk, a.D, w.qs, a.D, w.kp, s, a.Sk)
	if a.BiasBatch > 0 {
		bb := 0
		if a.BiasBatch > 1 {
			bb = b
		}
		src := bias[((bb*a.H+h)*a.Sq+i0)*a.Sk:]
		for i := range s {
			s[i] += src[i]
		}
	}
	var sums [64]float32
	for i := range rows {
		row := s[i*a.Sk : (i+1)*a.Sk]
		sums[i] = expSubSum(row, maxOf(row))
	}
	gemm.MulPackedSerial(rows, a.D, a.Sk, s, a.Sk, w.vp, w.o, a.D)
	for i := range rows {
		dst := out[(b*a.Sq+i0+i)*hd+h*a.D:]
		src := w.o[i*a.D : (i+1)*a.D]
		for j, x := range src {
			dst[j] = x / sums[i]
		}
	}
}
