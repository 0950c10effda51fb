package gemm

import (
	"fmt"
	"sync"

	"github.com/vdpp/vdpp/internal/parallel"
)

// parallelWork is the number of multiply-adds above which MulNT and MulPacked split their
// rows over goroutines: below it the hand-off costs more than a second core saves.
const parallelWork = 1 << 21

// Kernel names the micro-kernel in use: "avx512" (8x32 tiles), "avx2" (4x16, AVX2 and
// FMA) or "go" (portable, 4x16). Every kernel sums each element over k in increasing
// order with one fused multiply-add per product (the portable one with a multiply and an
// add), so avx512 and avx2 give the same bits.
func Kernel() string { return cur.name }

// Accelerated reports whether an assembly kernel runs on this CPU.
func Accelerated() bool { return cur.name != "go" }

// PanelWidth is the number of columns of C one packed panel of B covers: packed B holds
// panel q (columns q·w .. q·w+w−1) as [k][w] at offset q·w·k, columns past n zero.
func PanelWidth() int { return cur.nr }

// PackedLen is the length of B [k, n] packed into panels.
func PackedLen(n, k int) int { return (n + cur.nr - 1) / cur.nr * cur.nr * k }

// MulNT sets c[i*n+j] = Σ_p a[i*k+p]·b[j*k+p] for i < m, j < n: C = A·Bᵀ with A [m, k],
// B [n, k] and C [m, n] row-major. Large products split their rows over up to GOMAXPROCS
// goroutines; the result is the same bits however they are split. It panics if a slice
// is shorter than its shape says.
func MulNT(m, n, k int, a, b, c []float32) {
	if m < 0 || n < 0 || k < 0 || len(a) < m*k || len(b) < n*k || len(c) < m*n {
		panic(fmt.Sprintf("gemm: MulNT(%d, %d, %d) with len(a)=%d len(b)=%d len(c)=%d",
			m, n, k, len(a), len(b), len(c)))
	}
	if m == 0 || n == 0 {
		return
	}
	if k == 0 {
		clear(c[:m*n])
		return
	}
	panels := getScratch(PackedLen(n, k))
	defer putScratch(panels)
	PackRows(*panels, n, k, b, k)
	MulPacked(m, n, k, a, k, *panels, c, n)
}

// PackRows packs B given as n rows of k values (row j at b[j*ldb:]) into dst, which must
// hold PackedLen(n, k) values.
func PackRows(dst []float32, n, k int, b []float32, ldb int) {
	w := cur.nr
	for q := 0; q*w < n; q++ {
		panel := dst[q*w*k : (q+1)*w*k]
		cols := min(w, n-q*w)
		if cols < w {
			clear(panel)
		}
		for j := range cols {
			row := b[(q*w+j)*ldb : (q*w+j)*ldb+k]
			for p, v := range row {
				panel[p*w+j] = v
			}
		}
	}
}

// PackCols packs B given as k rows of n values (row p at b[p*ldb:]) into dst, which must
// hold PackedLen(n, k) values.
func PackCols(dst []float32, n, k int, b []float32, ldb int) {
	w := cur.nr
	for q := 0; q*w < n; q++ {
		panel := dst[q*w*k : (q+1)*w*k]
		j0 := q * w
		cols := min(w, n-j0)
		for p := range k {
			out := panel[p*w : p*w+w]
			copy(out, b[p*ldb+j0:p*ldb+j0+cols])
			clear(out[cols:])
		}
	}
}

// MulPacked sets c[i*ldc+j] = Σ_p a[i*lda+p]·B[p, j] for i < m, j < n, B packed by PackRows
// or PackCols. Large products split their rows over goroutines (same bits for any split).
func MulPacked(m, n, k int, a []float32, lda int, packed []float32, c []float32, ldc int) {
	if m <= 0 || n <= 0 {
		return
	}
	checkA(m, k, a, lda)
	if len(packed) < PackedLen(n, k) || len(c) < (m-1)*ldc+n {
		panic(fmt.Sprintf("gemm: MulPacked(%d, %d, %d): packed %d, c %d (ldc %d)", m, n, k, len(packed), len(c), ldc))
	}
	if m*n*k < parallelWork {
		mulRows(0, m, n, k, a, lda, packed, c, ldc)
		return
	}
	// Split on tile boundaries so that every worker's tiles are whole.
	tiles := (m + cur.mr - 1) / cur.mr
	parallel.For(tiles, 1, func(lo, hi int) {
		mulRows(lo*cur.mr, min(m, hi*cur.mr), n, k, a, lda, packed, c, ldc)
	})
}

// MulPackedSerial is MulPacked on the calling goroutine, for callers that split their
// work over the cores themselves.
func MulPackedSerial(m, n, k int, a []float32, lda int, packed []float32, c []float32, ldc int) {
	if m <= 0 || n <= 0 {
		return
	}
	checkA(m, k, a, lda)
	if len(packed) < PackedLen(n, k) || len(c) < (m-1)*ldc+n {
		panic(fmt.Sprintf("gemm: MulPackedSerial(%d, %d, %d): packed %d, c %d (ldc %d)", m, n, k, len(packed), len(c), ldc))
	}
	mulRows(0, m, n, k, a, lda, packed, c, ldc)
}

// MulPanel sets c[i*ldc+j] = Σ_p a[i*lda+p]·panel[p*w+j] for i < m, j < cols ≤ w, with one
// panel of w = PanelWidth() columns packed as [k][w]. It runs on the calling goroutine.
func MulPanel(m, k int, a []float32, lda int, panel []float32, cols int, c []float32, ldc int) {
	if m <= 0 || cols <= 0 {
		return
	}
	checkA(m, k, a, lda)
	if cols > cur.nr || len(panel) < cur.nr*k || len(c) < (m-1)*ldc+cols {
		panic(fmt.Sprintf("gemm: MulPanel(%d, %d) with %d columns: panel %d, c %d", m, k, cols, len(panel), len(c)))
	}
	var pad *[]float32
	for i := 0; i < m; i += cur.mr {
		rows := min(cur.mr, m-i)
		aTile, ld := a[i*lda:], lda
		if rows < cur.mr {
			pad = padRows(pad, a[i*lda:], lda, rows, k)
			aTile, ld = *pad, k
		}
		tile(rows, cols, k, aTile, ld, panel, c[i*ldc:], ldc)
	}
	if pad != nil {
		putScratch(pad)
	}
}

func checkA(m, k int, a []float32, lda int) {
	if m > 0 && k > 0 && (lda < k || len(a) < (m-1)*lda+k) {
		panic(fmt.Sprintf("gemm: A of %d rows of %d with stride %d has %d values", m, k, lda, len(a)))
	}
}

// mulRows computes rows lo..hi of C from the packed panels.
func mulRows(lo, hi, n, k int, a []float32, lda int, panels, c []float32, ldc int) {
	w := cur.nr
	var pad *[]float32
	for i := lo; i < hi; i += cur.mr {
		rows := min(cur.mr, hi-i)
		aTile, ld := a[i*lda:], lda
		if rows < cur.mr {
			pad = padRows(pad, a[i*lda:], lda, rows, k)
			aTile, ld = *pad, k
		}
		for q := 0; q*w < n; q++ {
			tile(rows, min(w, n-q*w), k, aTile, ld, panels[q*w*k:], c[i*ldc+q*w:], ldc)
		}
	}
	if pad != nil {
		putScratch(pad)
	}
}

// padRows copies rows < mr rows of A into a zeroed mr x k tile so that the kernel reads
// whole tiles.
func padRows(pad *[]float32, a []float32, lda, rows, k int) *[]float32 {
	if pad == nil {
		pad = getScratch(cur.mr * k)
	}
	clear(*pad)
	for r := range rows {
		copy((*pad)[r*k:(r+1)*k], a[r*lda:r*lda+k])
	}
	return pad
}

// tile computes a rows x cols corner (rows ≤ mr, cols ≤ nr) of C from a whole mr-row A
// tile and one panel; a partial tile goes through a scratch tile.
func tile(rows, cols, k int, a []float32, lda int, panel, c []float32, ldc int) {
	if rows == cur.mr && cols == cur.nr {
		cur.kernel(k, a, lda, panel, c, ldc)
		return
	}
	var edge [maxTile]float32
	cur.kernel(k, a, lda, panel, edge[:], cur.nr)
	for r := range rows {
		copy(c[r*ldc:r*ldc+cols], edge[r*cur.nr:r*cur.nr+cols])
	}
}

// maxTile is the largest mr·nr of any kernel.
const maxTile = 8 * 32

// isa is one micro-kernel: kernel sets c[r*ldc+j] = Σ_{p<k} a[r*lda+p]·b[p*nr+j] for
// r < mr, j < nr.
type isa struct {
	name   string
	mr, nr int
	kernel func(k int, a []float32, lda int, b []float32, c []float32, ldc int)
}

var goISA = isa{name: "go", mr: 4, nr: 16, kernel: kernel4x16Go}

// cur is the kernel in use, the best this CPU runs.
var cur = bestISA()

var scratchPool sync.Pool

func getScratch(n int) *[]float32 {
	if p, ok := scratchPool.Get().(*[]float32); ok && cap(*p) >= n {
		*p = (*p)[:n]
		return p
	}
	s := make([]float32, n)
	return &s
}

func putScratch(p *[]float32) { scratchPool.Put(p) }
