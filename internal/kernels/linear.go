package kernels

import (
	"fmt"
	"math"

	"github.com/vdpp/vdpp/internal/gemm"
	"github.com/vdpp/vdpp/internal/parallel"
	"github.com/vdpp/vdpp/internal/qgemm"
)

// Activation is an elementwise function applied to a product's result in its epilogue.
type Activation int

// The activations of Linear: none, exact GELU 0.5·x·(1 + erf(x/√2)), GELU with the tanh
// approximation 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) and SiLU x·sigmoid(x), each
// computed with the float32 functions of this package in the order the same formula
// takes as separate graph ops.
const (
	NoActivation Activation = iota
	GELU
	GELUTanh
	SiLUAct
)

// LinearShape describes y = act(x·wᵀ + bias) for x [M, K], w [N, K], bias [N]; with GEGLU
// the product has N = 2·H columns and the result [M, H] is y[:, :H]·GELU(y[:, H:]).
type LinearShape struct {
	M, N, K int
	Act     Activation
	GEGLU   bool
}

// OutCols is the number of columns of the result.
func (s LinearShape) OutCols() int {
	if s.GEGLU {
		return s.N / 2
	}
	return s.N
}

// linearRows is the number of rows one unit of Linear's work covers.
const linearRows = 128

// Matrix is a linear layer's weight W [N, K] in one of the forms the products read without
// widening it to float32 in memory: float32 rows (F32, [N][K]), half-precision panels
// (Halfs in format Half, packed by gemm.PackHalfRows), block-quantized panels (Quant,
// packed by qgemm.Pack), or any other form that can widen its rows (Rows: the product
// widens a group of rows at a time into a cache-sized buffer). Exactly one is set.
type Matrix struct {
	F32   []float32
	Half  gemm.Half
	Halfs []uint16
	Quant *qgemm.Weights
	Rows  RowDecoder
}

// RowDecoder widens rows j0..j1−1 of a weight W [N, K] to float32 into dst ([j1−j0][K]).
// It must be safe for concurrent use.
type RowDecoder interface {
	DecodeRows(j0, j1 int, dst []float32)
}

// fits reports whether m holds W [n, k] in exactly one form.
func (m Matrix) fits(n, k int) bool {
	forms := 0
	for _, set := range []bool{m.F32 != nil, m.Halfs != nil, m.Quant != nil, m.Rows != nil} {
		if set {
			forms++
		}
	}
	switch {
	case forms != 1:
		return false
	case m.Quant != nil:
		return m.Quant.N == n && m.Quant.K == k
	case m.Halfs != nil:
		return len(m.Halfs) >= gemm.HalfPackedLen(n, k)
	case m.Rows != nil:
		return true
	}
	return len(m.F32) >= n*k
}

// Linear sets out [M, OutCols] as s describes (bias may be nil). w is packed once for the
// matrix kernel; rows are split over the cores in blocks of linearRows; each block's bias
// and activation are applied while it is in cache. Each element is the kernel's sum over
// k, then plus the bias, then the activation: the bits of the same steps as separate ops.
func Linear(out, x, w, bias []float32, s LinearShape) {
	LinearMatrix(out, x, Matrix{F32: w}, bias, s)
}

// LinearMatrix is Linear with the weight in any Matrix form. Half-precision weights give
// the bits of Linear on their float32 widening; quantized ones are multiplied with the
// activations quantized per block of 32 (qgemm: Q8_0 within float rounding of the float
// product, Q4_K within about 1%).
// No float32 copy of a half or quantized weight is made.
func LinearMatrix(out, x []float32, w Matrix, bias []float32, s LinearShape) {
	if s.M <= 0 || s.N <= 0 || s.K <= 0 || (s.GEGLU && s.N%2 != 0) || !w.fits(s.N, s.K) ||
		len(x) < s.M*s.K || len(out) < s.M*s.OutCols() || (bias != nil && len(bias) < s.N) {
		panic(fmt.Sprintf("kernels: linear %+v with len(x)=%d len(out)=%d and a weight that does not fit", s, len(x), len(out)))
	}
	if w.Rows != nil {
		linearByRowGroups(out, x, w.Rows, bias, s)
		return
	}
	var product func(rows int, x, dst []float32)
	switch {
	case w.Quant != nil:
		product = func(rows int, x, dst []float32) { qgemm.MulSerial(rows, x, s.K, w.Quant, dst, s.N) }
	case w.Halfs != nil:
		product = func(rows int, x, dst []float32) {
			gemm.MulHalfSerial(w.Half, rows, s.N, s.K, x, s.K, w.Halfs, dst, s.N)
		}
	default:
		pw := gemm.PanelWidth()
		packedBuf := getPanel(gemm.PackedLen(s.N, s.K))
		defer panelPool.Put(packedBuf)
		packed := *packedBuf
		panels := (s.N + pw - 1) / pw
		parallel.For(panels, max(1, 1<<16/(pw*s.K)), func(lo, hi int) {
			n0, n1 := lo*pw, min(s.N, hi*pw)
			gemm.PackRows(packed[lo*pw*s.K:], n1-n0, s.K, w.F32[n0*s.K:], s.K)
		})
		product = func(rows int, x, dst []float32) { gemm.MulPackedSerial(rows, s.N, s.K, x, s.K, packed, dst, s.N) }
	}
	linearEpilogue(out, bias, s, func(r0, r1 int, scratch []float32) []float32 {
		dst := scratch
		if dst == nil {
			dst = out[r0*s.N:]
		}
		product(r1-r0, x[r0*s.K:], dst)
		return dst
	})
}

// linearEpilogue runs the product on blocks of linearRows rows over the cores and applies
// each block's bias and activation while it is in cache. product(r0, r1, scratch) returns
// rows r0..r1−1 of the product [M, N]: written into scratch ([linearRows, N], given with
// GEGLU only) or into out's rows, or wherever it already is.
func linearEpilogue(out, bias []float32, s LinearShape, product func(r0, r1 int, scratch []float32) []float32) {
	blocks := (s.M + linearRows - 1) / linearRows
	parallel.For(blocks, max(1, 1<<20/(linearRows*s.N*s.K)), func(lo, hi int) {
		var scratch []float32
		if s.GEGLU {
			buf := getPanel(linearRows * s.N)
			defer panelPool.Put(buf)
			scratch = *buf
		}
		for blk := lo; blk < hi; blk++ {
			r0, r1 := blk*linearRows, min(s.M, (blk+1)*linearRows)
			dst := product(r0, r1, scratch)
			for i := range r1 - r0 {
				row := dst[i*s.N : (i+1)*s.N]
				if bias != nil {
					addRow(row, bias[:s.N])
				}
				if s.GEGLU {
					h := s.N / 2
					gate := row[h:]
					activate(GELU, gate)
					mulRow(out[(r0+i)*h:(r0+i+1)*h], row[:h], gate)
					continue
				}
				activate(s.Act, row)
			}
		}
	})
}

// rowGroup is the number of weight rows linearByRowGroups widens at a time.
const rowGroup = 256

// linearByRowGroups is LinearMatrix for a weight that widens its rows: the columns of the product
// in groups of rowGroup weight rows, each group widened and packed once (on the cores, a
// panel range each), multiplied by every row of x, and dropped; then the epilogue. With
// GEGLU the product goes to a scratch [M, N] first.
func linearByRowGroups(out, x []float32, w RowDecoder, bias []float32, s LinearShape) {
	prod := out
	if s.GEGLU {
		buf := getPanel(s.M * s.N)
		defer panelPool.Put(buf)
		prod = *buf
	}
	pw := gemm.PanelWidth()
	wide := getPanel(rowGroup * s.K)
	defer panelPool.Put(wide)
	packed := getPanel(gemm.PackedLen(rowGroup, s.K))
	defer panelPool.Put(packed)
	for j0 := 0; j0 < s.N; j0 += rowGroup {
		n := min(rowGroup, s.N-j0)
		panels := (n + pw - 1) / pw
		parallel.For(panels, 1, func(lo, hi int) {
			r0, r1 := lo*pw, min(n, hi*pw)
			w.DecodeRows(j0+r0, j0+r1, (*wide)[r0*s.K:r1*s.K])
			gemm.PackRows((*packed)[lo*pw*s.K:], r1-r0, s.K, (*wide)[r0*s.K:], s.K)
		})
		blocks := (s.M + linearRows - 1) / linearRows
		parallel.For(blocks, max(1, 1<<20/(linearRows*n*s.K)), func(lo, hi int) {
			r0, r1 := lo*linearRows, min(s.M, hi*linearRows)
			gemm.MulPackedSerial(r1-r0, n, s.K, x[r0*s.K:], s.K, *packed, prod[r0*s.N+j0:], s.N)
		})
	}
	linearEpilogue(out, bias, s, func(r0, _ int, _ []float32) []float32 { return prod[r0*s.N:] })
}

// sqrtHalf, tanhC and gelu's constants as the graph ops round them to float32.
var (
	sqrtHalf = float32(1 / math.Sqrt2)
	tanhC    = float32(math.Sqrt(2 / math.Pi))
)

// activate applies a in place.
func activate(a Activation, row []float32) {
	switch {
	case a == GELU && vecExp:
		geluSlice(row, row)
		return
	case a == GELUTanh && vecExp:
		geluTanhSlice(row, row)
		return
	}
	switch a {
	case GELU:
		for i, x := range row {
			row[i] = float32(x*0.5) * float32(1+Erf(float32(x*sqrtHalf)))
		}
	case GELUTanh:
		for i, x := range row {
			inner := float32(float32(x+float32(float32(float32(x*x)*x)*0.044715)) * tanhC)
			row[i] = float32(x*0.5) * float32(1+Tanh(inner))
		}
	case SiLUAct:
		SiLUSlice(row, row)
	}
}

// addRow sets dst[i] += src[i] (vector code where the CPU has it, the same bits).
func addRow(dst, src []float32) {
	if vecExp {
		addVec(dst, src)
		return
	}
	for i, v := range src[:len(dst)] {
		dst[i] += v
	}
}

// mulRow sets dst[i] = a[i]·b[i].
func mulRow(dst, a, b []float32) {
	if vecExp {
		mulVec(dst, a, b)
		return
	}
	for i := range dst {
		dst[i] = a[i] * b[i]
	}
}

// addScalar sets dst[i] += b.
func addScalar(dst []float32, b float32) {
	if vecExp {
		addScalarVec(dst, b)
		return
	}
	for i := range dst {
		dst[i] += b
	}
}
