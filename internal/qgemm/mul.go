package qgemm

import (
	"fmt"
	"sync"

	"github.com/vdpp/vdpp/internal/parallel"
)

// rowBlockBytes bounds the quantized activations of one row block (reused by every panel
// of the weights while they stay in the L2 cache).
const rowBlockBytes = 256 << 10

// parallelWork is the number of multiply-adds above which Mul splits its rows.
const parallelWork = 1 << 21

// Kernel names the kernel in use: "avx512vnni" or "go".
func Kernel() string { return cur.name }

// Accelerated reports whether an assembly kernel runs on this CPU.
func Accelerated() bool { return cur.name != "go" }

// Mul sets c[i*ldc+j] = Σ_p a[i*lda+p]·W[j, p] for i < m, j < W.N: the product of a linear
// layer, y = x·Wᵀ. Large products split their rows over goroutines; the result is the
// same bits for any split. It panics if a slice is shorter than the shapes say.
func Mul(m int, a []float32, lda int, w *Weights, c []float32, ldc int) {
	if m <= 0 {
		return
	}
	check(m, a, lda, w, c, ldc)
	tiles := (m + mr - 1) / mr
	grain := max(1, parallelWork/(mr*w.N*w.K))
	parallel.For(tiles, grain, func(lo, hi int) {
		r0, r1 := lo*mr, min(m, hi*mr)
		mulRows(r1-r0, a[r0*lda:], lda, w, c[r0*ldc:], ldc)
	})
}

// MulSerial is Mul on the calling goroutine, for callers that split their work over the
// cores themselves.
func MulSerial(m int, a []float32, lda int, w *Weights, c []float32, ldc int) {
	if m <= 0 {
		return
	}
	check(m, a, lda, w, c, ldc)
	mulRows(m, a, lda, w, c, ldc)
}

func check(m int, a []float32, lda int, w *Weights, c []float32, ldc int) {
	size, err := PackedLen(w.Type, w.N, w.K)
	if err != nil {
		panic(err)
	}
	if len(w.Data) != size || lda < w.K || len(a) < (m-1)*lda+w.K || ldc < w.N || len(c) < (m-1)*ldc+w.N {
		panic(fmt.Sprintf("qgemm: product of %d rows by %v [%d, %d] (%d bytes): a %d (lda %d), c %d (ldc %d)",
			m, w.Type, w.N, w.K, len(w.Data), len(a), lda, len(c), ldc))
	}
}

// mulRows computes rows 0..m of C: the rows in blocks whose quantized activations fit
// rowBlockBytes, each block's tiles quantized once and multiplied by every panel.
func mulRows(m int, a []float32, lda int, w *Weights, c []float32, ldc int) {
	nb := w.K / 32
	tileBytes := nb * aBlockBytes
	tiles := (m + mr - 1) / mr
	perBlock := max(1, min(tiles, rowBlockBytes/tileBytes))
	aq := getScratch(perBlock * tileBytes)
	defer scratchPool.Put(aq)
	intCorr := w.Type == Q8_0
	kernel := cur.q8_0
	if w.Type == Q4_K {
		kernel = cur.q4_K
	}
	var edge [mr * PanelCols]float32
	for t0 := 0; t0 < tiles; t0 += perBlock {
		nt := min(perBlock, tiles-t0)
		for t := range nt {
			i := (t0 + t) * mr
			cur.quantize((*aq)[t*tileBytes:(t+1)*tileBytes], min(mr, m-i), w.K, a[i*lda:], lda, intCorr)
		}
		for p := 0; p*PanelCols < w.N; p++ {
			panel := w.panel(p)
			cols := min(PanelCols, w.N-p*PanelCols)
			for t := range nt {
				i := (t0 + t) * mr
				rows := min(mr, m-i)
				at := (*aq)[t*tileBytes : (t+1)*tileBytes]
				dst := c[i*ldc+p*PanelCols:]
				if rows == mr && cols == PanelCols {
					kernel(nb, at, panel, dst, ldc)
					continue
				}
				kernel(nb, at, panel, edge[:], PanelCols)
				for r := range rows {
					copy(dst[r*ldc:r*ldc+cols], edge[r*PanelCols:r*PanelCols+cols])
				}
			}
		}
	}
}

// isa is one set of kernels: q8_0 and q4_K compute a tile of mr rows by PanelCols columns
// of C (row stride ldc) from a quantized activation tile of nb blocks of 32 and one panel;
// quantize writes a tile.
type isa struct {
	name     string
	q8_0     func(nb int, a, w []byte, c []float32, ldc int)
	q4_K     func(nb int, a, w []byte, c []float32, ldc int)
	quantize func(dst []byte, rows, k int, a []float32, lda int, intCorr bool)
}

var goISA = isa{name: "go", q8_0: kernelQ8_0Go, q4_K: kernelQ4_KGo, quantize: quantizeTile}

// cur is the kernel set in use, the best this CPU runs.
var cur = bestISA()

var scratchPool sync.Pool

func getScratch(n int) *[]byte {
	if p, ok := scratchPool.Get().(*[]byte); ok && cap(*p) >= n {
		*p = (*p)[:n]
		return p
	}
	s := make([]byte, n)
	return &s
}
