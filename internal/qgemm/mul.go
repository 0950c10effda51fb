package qgemm

import (
	"fmt"
	"sync"

	"github.com/vdpp/vdpp/internal/parallel"
)

// kcBlocks is the number of 32-wide blocks of the contraction one pass over the panels
// covers (a multiple of Q4_K's 8): a block of rows' quantized activations for it stay in
// the L2 cache (rowBlockBytes) while each panel's slice of it is read from L1, and the
// kernel continues each sum across passes (in C), so the cut changes no result.
var kcBlocks = 32

// rowBlockBytes bounds one pass's slice of a block of rows' quantized activations.
const rowBlockBytes = 512 << 10

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

// mulRows computes rows 0..m of C: the rows in blocks whose quantized activations for one
// pass of kcBlocks blocks fit rowBlockBytes; each block's tiles are quantized once (the whole
// contraction), then for each pass every panel's slice is multiplied by every tile's.
func mulRows(m int, a []float32, lda int, w *Weights, c []float32, ldc int) {
	nb := w.K / 32
	wide := w.Type == Q8_0
	bb := blockBytes(wide)
	tileBytes := nb * bb
	tiles := (m + mr - 1) / mr
	perBlock := max(1, min(tiles, rowBlockBytes/(min(kcBlocks, nb)*bb)))
	aq := getScratch(perBlock * tileBytes)
	defer scratchPool.Put(aq)
	kernel, wBlock := cur.q8_0, layouts[w.Type].panelBytes
	if w.Type == Q4_K {
		kernel, wBlock = cur.q4_K, wBlock/8 // a super-block per 8 blocks
	}
	var edge [mr * PanelCols]float32
	for t0 := 0; t0 < tiles; t0 += perBlock {
		nt := min(perBlock, tiles-t0)
		for t := range nt {
			i := (t0 + t) * mr
			cur.quantize((*aq)[t*tileBytes:(t+1)*tileBytes], min(mr, m-i), w.K, a[i*lda:], lda, wide)
		}
		for b0 := 0; b0 < nb; b0 += kcBlocks {
			kb, acc := min(kcBlocks, nb-b0), b0 > 0
			for p := 0; p*PanelCols < w.N; p++ {
				panel := w.panel(p)[b0*wBlock : (b0+kb)*wBlock]
				cols := min(PanelCols, w.N-p*PanelCols)
				for t := range nt {
					i := (t0 + t) * mr
					rows := min(mr, m-i)
					at := (*aq)[t*tileBytes+b0*bb : t*tileBytes+(b0+kb)*bb]
					dst := c[i*ldc+p*PanelCols:]
					if rows == mr && cols == PanelCols {
						kernel(kb, at, panel, dst, ldc, acc)
						continue
					}
					if acc {
						for r := range rows {
							copy(edge[r*PanelCols:r*PanelCols+cols], dst[r*ldc:r*ldc+cols])
						}
					}
					kernel(kb, at, panel, edge[:], PanelCols, acc)
					for r := range rows {
						copy(dst[r*ldc:r*ldc+cols], edge[r*PanelCols:r*PanelCols+cols])
					}
				}
			}
		}
	}
}

// isa is one set of kernels: q8_0 and q4_K compute a tile of mr rows by PanelCols columns
// of C (row stride ldc) from a quantized activation tile of nb blocks of 32 (wide for q8_0,
// narrow for q4_K) and one panel, continuing C's sums with acc; quantize writes a tile.
type isa struct {
	name     string
	q8_0     func(nb int, a, w []byte, c []float32, ldc int, acc bool)
	q4_K     func(nb int, a, w []byte, c []float32, ldc int, acc bool)
	quantize func(dst []byte, rows, k int, a []float32, lda int, wide bool)
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
