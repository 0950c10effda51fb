package gemm

import (
	"fmt"
	"sync"

	"github.com/vdpp/vdpp/internal/parallel"
)

// kc is the length of the blocks a long contraction is cut into: one packed A tile block
// and one panel block then fit in the L1 cache together. The kernel continues each
// element's sum across blocks, so the cut does not change any result.
var kc = 256

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

// PackedALen is the length of A [m, k] packed by PackA.
func PackedALen(m, k int) int { return (m + cur.mr - 1) / cur.mr * cur.mr * k }

// PackA packs A [m, k] (row i at a[i*lda:]) into dst (PackedALen(m, k) values): tiles of
// the kernel's rows, each [k][rows], rows past m zero. The kernel then reads every k-step's
// values of a tile from one contiguous run, whatever A's row stride.
func PackA(dst []float32, m, k int, a []float32, lda int) {
	mr := cur.mr
	for t := 0; t*mr < m; t++ {
		packATile(dst[t*mr*k:(t+1)*mr*k], min(mr, m-t*mr), k, a[t*mr*lda:], lda)
	}
}

// packATile packs rows (≤ mr) rows of A into one tile [k][mr].
func packATile(dst []float32, rows, k int, a []float32, lda int) {
	mr := cur.mr
	if rows == mr && cur.pack != nil {
		cur.pack(dst, k, a, lda)
		return
	}
	if rows < mr {
		clear(dst)
	}
	for r := range rows {
		row := a[r*lda : r*lda+k]
		for p, v := range row {
			dst[p*mr+r] = v
		}
	}
}

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
	for q := 0; q*cur.nr < n; q++ {
		panel := dst[q*cur.nr*k : (q+1)*cur.nr*k]
		cols := min(cur.nr, n-q*cur.nr)
		if cols < cur.nr {
			clear(panel)
		}
		for j := range cols {
			row := b[(q*cur.nr+j)*ldb : (q*cur.nr+j)*ldb+k]
			for p, v := range row {
				panel[p*cur.nr+j] = v
			}
		}
	}
}

// PackCols packs B given as k rows of n values (row p at b[p*ldb:]) into dst, which must
// hold PackedLen(n, k) values.
func PackCols(dst []float32, n, k int, b []float32, ldb int) {
	for q := 0; q*cur.nr < n; q++ {
		panel := dst[q*cur.nr*k : (q+1)*cur.nr*k]
		j0 := q * cur.nr
		cols := min(cur.nr, n-j0)
		for p := range k {
			out := panel[p*cur.nr : p*cur.nr+cur.nr]
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
	checkMul(m, n, k, a, lda, packed, c, ldc)
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
	checkMul(m, n, k, a, lda, packed, c, ldc)
	mulRows(0, m, n, k, a, lda, packed, c, ldc)
}

func checkMul(m, n, k int, a []float32, lda int, packed, c []float32, ldc int) {
	checkA(m, k, a, lda)
	if len(packed) < PackedLen(n, k) || len(c) < (m-1)*ldc+n {
		panic(fmt.Sprintf("gemm: product (%d, %d, %d): packed %d, c %d (ldc %d)", m, n, k, len(packed), len(c), ldc))
	}
}

// MulPanel sets c[i*ldc+j] = Σ_p a[i*lda+p]·panel[p*w+j] for i < m, j < cols ≤ w, with one
// panel of w = PanelWidth() columns packed as [k][w]. It runs on the calling goroutine.
func MulPanel(m, k int, a []float32, lda int, panel []float32, cols int, c []float32, ldc int) {
	if m <= 0 || cols <= 0 {
		return
	}
	checkA(m, k, a, lda)
	ap := getScratch(PackedALen(m, k))
	defer putScratch(ap)
	PackA(*ap, m, k, a, lda)
	MulPackedAPanel(m, k, *ap, panel, cols, c, ldc)
}

// MulPackedAPanel is MulPanel with A packed by PackA (for callers that multiply one A by
// many panels).
func MulPackedAPanel(m, k int, ap, panel []float32, cols int, c []float32, ldc int) {
	if m <= 0 || cols <= 0 {
		return
	}
	if cols > cur.nr || len(panel) < cur.nr*k || len(ap) < PackedALen(m, k) || len(c) < (m-1)*ldc+cols {
		panic(fmt.Sprintf("gemm: MulPackedAPanel(%d, %d) with %d columns: a %d, panel %d, c %d", m, k, cols, len(ap), len(panel), len(c)))
	}
	mr := cur.mr
	for k0 := 0; k0 < max(k, 1); k0 += kc {
		kl := min(kc, k-k0)
		for i := 0; i < m; i += mr {
			tile(min(mr, m-i), cols, kl, ap[i*k+k0*mr:], panel[k0*cur.nr:], c[i*ldc:], ldc, k0 > 0)
		}
	}
}

// MulRowPtrs sets c[i*ldc+j] = Σ_p a[i*lda+p]·rows[p][j] for i < m, j < w = PanelWidth():
// one panel of B given as k row pointers instead of packed, so that a caller whose B rows
// already lie in memory (a convolution's shifted input rows) need not copy them. Every
// rows[p] must point at w readable values; c must have w columns. It runs on the calling
// goroutine and gives the bits MulPanel gives for the same values.
func MulRowPtrs(m, k int, a []float32, lda int, rows []*float32, c []float32, ldc int) {
	if m <= 0 {
		return
	}
	checkA(m, k, a, lda)
	ap := getScratch(PackedALen(m, k))
	defer putScratch(ap)
	PackA(*ap, m, k, a, lda)
	MulPackedARowPtrGroup(m, k, *ap, [][]*float32{rows}, c, []int{0}, ldc)
}

// MulPackedARowPtrGroup is MulRowPtrs, with A packed by PackA, for several panels at once:
// panel g's rows are rows[g] and its w columns go to c[offs[g]:] (row stride ldc). Each
// k-block of a tile of A is used for every panel of the group while it is in the L1 cache,
// so A is read once per group rather than once per panel; each panel gets the bits it gets
// alone.
func MulPackedARowPtrGroup(m, k int, ap []float32, rows [][]*float32, c []float32, offs []int, ldc int) {
	if m <= 0 || len(rows) == 0 {
		return
	}
	w := cur.nr
	for g, r := range rows {
		if len(r) < k || offs[g] < 0 || len(c) < offs[g]+(m-1)*ldc+w {
			panic(fmt.Sprintf("gemm: MulPackedARowPtrGroup(%d, %d): panel %d with %d rows at %d, c %d", m, k, g, len(r), offs[g], len(c)))
		}
	}
	if len(ap) < PackedALen(m, k) {
		panic(fmt.Sprintf("gemm: MulPackedARowPtrGroup(%d, %d): a %d", m, k, len(ap)))
	}
	if k == 0 {
		for g := range rows {
			for i := range m {
				clear(c[offs[g]+i*ldc : offs[g]+i*ldc+w])
			}
		}
		return
	}
	mr := cur.mr
	var edge [maxTile]float32
	for k0 := 0; k0 < k; k0 += kc {
		kl, acc := min(kc, k-k0), k0 > 0
		for i := 0; i < m; i += mr {
			rs := min(mr, m-i)
			a := ap[i*k+k0*mr:]
			for g, r := range rows {
				dst := c[offs[g]+i*ldc:]
				if rs == mr {
					cur.kernelPtr(kl, a, r[k0:], dst, ldc, acc)
					continue
				}
				if acc {
					for j := range rs {
						copy(edge[j*w:(j+1)*w], dst[j*ldc:j*ldc+w])
					}
				}
				cur.kernelPtr(kl, a, r[k0:], edge[:], w, acc)
				for j := range rs {
					copy(dst[j*ldc:j*ldc+w], edge[j*w:(j+1)*w])
				}
			}
		}
	}
}

func checkA(m, k int, a []float32, lda int) {
	if m > 0 && k > 0 && (lda < k || len(a) < (m-1)*lda+k) {
		panic(fmt.Sprintf("gemm: A of %d rows of %d with stride %d has %d values", m, k, lda, len(a)))
	}
}

// Blocking of mulRows (the loop order of GotoBLAS): rows in blocks of mc, the contraction
// in blocks of kc, panels in groups of nb. One row block's packed A for one k-block stays
// in the L2 cache while one group of panel blocks (nb·nr·kc values) is used by every row
// tile of it, so each value of B is read from memory once per mc rows, not once per tile.
const (
	mc = 128
	nb = 8
)

// mulRows computes rows lo..hi of C from the packed panels.
func mulRows(lo, hi, n, k int, a []float32, lda int, panels, c []float32, ldc int) {
	mr, w := cur.mr, cur.nr
	np := (n + w - 1) / w
	ap := getScratch(mc * min(k, kc))
	defer putScratch(ap)
	for r0 := lo; r0 < hi; r0 += mc {
		r1 := min(hi, r0+mc)
		tiles := (r1 - r0 + mr - 1) / mr
		for k0 := 0; k0 < k; k0 += kc {
			kl, acc := min(kc, k-k0), k0 > 0
			for t := range tiles {
				i := r0 + t*mr
				packATile((*ap)[t*mr*kl:(t+1)*mr*kl], min(mr, r1-i), kl, a[i*lda+k0:], lda)
			}
			for q0 := 0; q0 < np; q0 += nb {
				for t := range tiles {
					i := r0 + t*mr
					rows := min(mr, r1-i)
					at := (*ap)[t*mr*kl:]
					for q := q0; q < min(np, q0+nb); q++ {
						tile(rows, min(w, n-q*w), kl, at, panels[q*w*k+k0*w:], c[i*ldc+q*w:], ldc, acc)
					}
				}
			}
		}
	}
}

// tile computes a rows x cols corner (rows ≤ mr, cols ≤ cur.nr) of C from a packed A tile and
// one panel (continuing C's sums when acc); a partial tile goes through a scratch tile.
func tile(rows, cols, k int, a, panel, c []float32, ldc int, acc bool) {
	if rows == cur.mr && cols == cur.nr {
		cur.kernel(k, a, panel, c, ldc, acc)
		return
	}
	var edge [maxTile]float32
	if acc {
		for r := range rows {
			copy(edge[r*cur.nr:r*cur.nr+cols], c[r*ldc:r*ldc+cols])
		}
	}
	cur.kernel(k, a, panel, edge[:], cur.nr, acc)
	for r := range rows {
		copy(c[r*ldc:r*ldc+cols], edge[r*cur.nr:r*cur.nr+cols])
	}
}

// maxTile is the largest mr·cur.nr of any kernel.
const maxTile = 8 * 32

// isa is one micro-kernel: kernel sets c[r*ldc+j] = Σ_{p<k} a[p*mr+r]·b[p*cur.nr+j] for r < mr,
// j < cur.nr (A's tile packed by PackA), or continues c's sums with acc; kernelPtr reads panel
// row p at rows[p].
type isa struct {
	name      string
	mr, nr    int
	kernel    func(k int, a, b, c []float32, ldc int, acc bool)
	kernelPtr func(k int, a []float32, rows []*float32, c []float32, ldc int, acc bool)
	// pack, when set, packs mr whole rows of A into a tile [k][mr] (faster than packATile).
	pack func(dst []float32, k int, a []float32, lda int)
	// half[h] is kernel with panel rows of nr half values of format h, HalfPanelWidth apart.
	half [2]func(k int, a []float32, b []uint16, c []float32, ldc int, acc bool)
}

var goISA = isa{name: "go", mr: 4, nr: 16, kernel: kernel4x16Go, kernelPtr: kernel4x16GoPtr,
	half: [2]func(int, []float32, []uint16, []float32, int, bool){kernel4x16HalfGo(F16), kernel4x16HalfGo(BF16)}}

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
