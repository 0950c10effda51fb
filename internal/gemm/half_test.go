package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// randHalf returns n random values of format h (normal, scaled; no NaN or infinity) and
// their float32 widening.
func randHalf(r *rand.Rand, h Half, n int) ([]uint16, []float32) {
	bits, wide := make([]uint16, n), make([]float32, n)
	for i := range bits {
		for {
			v := uint16(r.Uint32())
			if h == F16 && v&0x7c00 == 0x7c00 || h == BF16 && v&0x7f80 == 0x7f80 {
				continue // NaN or infinity
			}
			if h == BF16 {
				v = v&0x8000 | (v&0x7fff)%0x4000 + 0x3000 // magnitudes about 2^-31 .. 2^2
			}
			bits[i], wide[i] = v, h.ToFloat32(v)
			break
		}
	}
	return bits, wide
}

// TestMulHalfIsFloatProduct checks the contract: MulHalf gives the bits of MulPacked on the
// widened values, for every kernel, on ragged and strided shapes.
func TestMulHalfIsFloatProduct(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, h := range []Half{F16, BF16} {
		for _, sh := range [][3]int{{1, 1, 1}, {9, 40, 9}, {33, 65, 300}, {8, 32, 1152}, {70, 3, 20}} {
			m, n, k := sh[0], sh[1], sh[2]
			lda, ldc := k+3, n+5
			a := randSlice(r, m*lda)
			bits, wide := randHalf(r, h, n*k)
			packed := make([]uint16, HalfPackedLen(n, k))
			PackHalfRows(packed, n, k, bits, k)
			for _, kern := range isas() {
				t.Run(fmt.Sprintf("%v/%s/%dx%dx%d", h, kern.name, m, n, k), func(t *testing.T) {
					withISA(t, kern, func() {
						fp := make([]float32, PackedLen(n, k))
						PackRows(fp, n, k, wide, k)
						want, got := make([]float32, m*ldc), make([]float32, m*ldc)
						MulPacked(m, n, k, a, lda, fp, want, ldc)
						for i := range got {
							got[i] = float32(math.NaN())
						}
						MulHalf(h, m, n, k, a, lda, packed, got, ldc)
						for i := range m {
							for j := range n {
								if math.Float32bits(got[i*ldc+j]) != math.Float32bits(want[i*ldc+j]) {
									t.Fatalf("(%d, %d): %g, float32 product %g", i, j, got[i*ldc+j], want[i*ldc+j])
								}
							}
						}
					})
				})
			}
		}
	}
}

// TestMulHalfRowsIndependent checks that a row alone gives the bits it gets in a large
// (parallel) product.
func TestMulHalfRowsIndependent(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	const m, n, k = 203, 70, 300
	a := randSlice(r, m*k)
	bits, _ := randHalf(r, F16, n*k)
	packed := make([]uint16, HalfPackedLen(n, k))
	PackHalfRows(packed, n, k, bits, k)
	full, one := make([]float32, m*n), make([]float32, n)
	MulHalf(F16, m, n, k, a, k, packed, full, n)
	for i := range m {
		MulHalfSerial(F16, 1, n, k, a[i*k:(i+1)*k], k, packed, one, n)
		for j := range n {
			if math.Float32bits(one[j]) != math.Float32bits(full[i*n+j]) {
				t.Fatalf("row %d col %d: alone %g, in the product %g", i, j, one[j], full[i*n+j])
			}
		}
	}
}

func TestHalfToFloat32(t *testing.T) {
	for _, tc := range []struct {
		h    Half
		bits uint16
		want float32
	}{
		{F16, 0x3c00, 1}, {F16, 0xc000, -2}, {F16, 0x0001, 5.9604645e-08}, {F16, 0x7bff, 65504},
		{F16, 0x8000, float32(math.Copysign(0, -1))}, {F16, 0x7c00, float32(math.Inf(1))},
		{BF16, 0x3f80, 1}, {BF16, 0xc040, -3}, {BF16, 0x0001, math.Float32frombits(0x10000)},
	} {
		if got := tc.h.ToFloat32(tc.bits); math.Float32bits(got) != math.Float32bits(tc.want) {
			t.Errorf("%v %#04x: %g, want %g", tc.h, tc.bits, got, tc.want)
		}
	}
	if v := F16.ToFloat32(0x7e00); !math.IsNaN(float64(v)) {
		t.Errorf("f16 NaN widened to %g", v)
	}
}

func BenchmarkMulHalf(b *testing.B) {
	r := rand.New(rand.NewPCG(25, 26))
	const m, n, k = 256, 1536, 1536
	a, c := randSlice(r, m*k), make([]float32, m*n)
	b.Run("f32", func(b *testing.B) {
		packed := make([]float32, PackedLen(n, k))
		PackRows(packed, n, k, randSlice(r, n*k), k)
		for b.Loop() {
			MulPacked(m, n, k, a, k, packed, c, n)
		}
		b.ReportMetric(float64(2*m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	})
	for _, h := range []Half{F16, BF16} {
		b.Run(h.String(), func(b *testing.B) {
			bits, _ := randHalf(r, h, n*k)
			packed := make([]uint16, HalfPackedLen(n, k))
			PackHalfRows(packed, n, k, bits, k)
			for b.Loop() {
				MulHalf(h, m, n, k, a, k, packed, c, n)
			}
			b.ReportMetric(float64(2*m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
