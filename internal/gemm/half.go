package gemm

import (
	"fmt"

	"github.com/vdpp/vdpp/internal/parallel"
	"github.com/vdpp/vdpp/tensor/quant"
)

// Half is a 16-bit float format of packed B: IEEE binary16 or bfloat16.
type Half int

// The half formats.
const (
	F16 Half = iota
	BF16
)

func (h Half) String() string {
	if h == BF16 {
		return "bf16"
	}
	return "f16"
}

// HalfPanelWidth is the number of columns of C one panel of half-precision B covers, for
// every kernel (a layout fixed at load, whatever the CPU): panel q (columns 32q..32q+31) is
// [k][32] at offset 32·q·k, columns past n zero.
const HalfPanelWidth = 32

// HalfPackedLen is the length of B [k, n] packed into half panels.
func HalfPackedLen(n, k int) int {
	return (n + HalfPanelWidth - 1) / HalfPanelWidth * HalfPanelWidth * k
}

// PackHalfRows packs B given as n rows of k half values (row j at b[j*ldb:], the layout of
// a linear layer's weight [out, in]) into dst (HalfPackedLen(n, k) values), bits unchanged.
func PackHalfRows(dst []uint16, n, k int, b []uint16, ldb int) {
	const w = HalfPanelWidth
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

// ToFloat32 widens one value of format h to float32 (exactly, as tensor/quant does).
func (h Half) ToFloat32(v uint16) float32 {
	if h == BF16 {
		return quant.BFloat16ToFloat32(v)
	}
	return quant.HalfToFloat32(v)
}

// MulHalf sets c[i*ldc+j] = Σ_p a[i*lda+p]·B[p, j] for i < m, j < n, B packed by
// PackHalfRows in format h and widened to float32 as the kernel reads it: the bits MulPacked
// gives for B widened to float32 and packed by PackRows (same kernel, same order of sums),
// without a float32 copy of B. Large products split their rows over goroutines (same bits
// for any split).
func MulHalf(h Half, m, n, k int, a []float32, lda int, packed []uint16, c []float32, ldc int) {
	if m <= 0 || n <= 0 {
		return
	}
	checkHalf(m, n, k, a, lda, packed, c, ldc)
	if m*n*k < parallelWork {
		mulRowsHalf(h, 0, m, n, k, a, lda, packed, c, ldc)
		return
	}
	tiles := (m + cur.mr - 1) / cur.mr
	parallel.For(tiles, 1, func(lo, hi int) {
		mulRowsHalf(h, lo*cur.mr, min(m, hi*cur.mr), n, k, a, lda, packed, c, ldc)
	})
}

// MulHalfSerial is MulHalf on the calling goroutine.
func MulHalfSerial(h Half, m, n, k int, a []float32, lda int, packed []uint16, c []float32, ldc int) {
	if m <= 0 || n <= 0 {
		return
	}
	checkHalf(m, n, k, a, lda, packed, c, ldc)
	mulRowsHalf(h, 0, m, n, k, a, lda, packed, c, ldc)
}

func checkHalf(m, n, k int, a []float32, lda int, packed []uint16, c []float32, ldc int) {
	checkA(m, k, a, lda)
	if len(packed) < HalfPackedLen(n, k) || len(c) < (m-1)*ldc+n {
		panic(fmt.Sprintf("gemm: half product (%d, %d, %d): packed %d, c %d (ldc %d)", m, n, k, len(packed), len(c), ldc))
	}
}

// mulRowsHalf is mulRows for half panels: the same blocking, tiles and kernel order, each
// tile's panel values widened as the kernel loads them.
func mulRowsHalf(h Half, lo, hi, n, k int, a []float32, lda int, panels []uint16, c []float32, ldc int) {
	const w = HalfPanelWidth
	mr, nr := cur.mr, cur.nr
	np := (n + w - 1) / w
	ap := getScratch(mc * min(k, kc))
	defer putScratch(ap)
	kern := cur.half[h]
	var edge [maxTile]float32
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
						panel := panels[q*w*k+k0*w:]
						for j0 := 0; j0 < w && q*w+j0 < n; j0 += nr {
							cols := min(nr, n-q*w-j0)
							dst := c[i*ldc+q*w+j0:]
							if rows == mr && cols == nr {
								kern(kl, at, panel[j0:], dst, ldc, acc)
								continue
							}
							if acc {
								for r := range rows {
									copy(edge[r*nr:r*nr+cols], dst[r*ldc:r*ldc+cols])
								}
							}
							kern(kl, at, panel[j0:], edge[:], nr, acc)
							for r := range rows {
								copy(dst[r*ldc:r*ldc+cols], edge[r*nr:r*nr+cols])
							}
						}
					}
				}
			}
		}
	}
}

// kernel4x16HalfGo is kernel4x16Go reading row p of the panel from b[p*HalfPanelWidth:],
// values of format h.
func kernel4x16HalfGo(h Half) func(k int, a []float32, b []uint16, c []float32, ldc int, cont bool) {
	return func(k int, a []float32, b []uint16, c []float32, ldc int, cont bool) {
		var row [16]float32
		var acc [4][16]float32
		if cont {
			for r := range 4 {
				copy(acc[r][:], c[r*ldc:r*ldc+16])
			}
		}
		for p := range k {
			for j, v := range b[p*HalfPanelWidth : p*HalfPanelWidth+16] {
				row[j] = h.ToFloat32(v)
			}
			for r := range 4 {
				av := a[p*4+r]
				for j := range row {
					acc[r][j] += av * row[j]
				}
			}
		}
		for r := range 4 {
			copy(c[r*ldc:r*ldc+16], acc[r][:])
		}
	}
}
