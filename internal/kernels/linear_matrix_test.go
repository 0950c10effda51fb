package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/vdpp/vdpp/internal/gemm"
	"github.com/vdpp/vdpp/internal/qgemm"
)

// randomQuant returns W [n, k] of type t with random quants and weight-sized scales, packed.
func randomQuant(t *testing.T, r *rand.Rand, typ qgemm.Type, n, k int) *qgemm.Weights {
	t.Helper()
	blockBytes := typ.BlockBytes()
	src := make([]byte, n*k/qgemm.BlockK(typ)*blockBytes)
	for i := range src {
		src[i] = byte(r.Uint32())
	}
	for b := 0; b < len(src); b += blockBytes {
		src[b], src[b+1] = byte(r.Uint32()), 0x18 // d: binary16 about 0.002
		if typ == qgemm.Q4_K {
			src[b+2], src[b+3] = byte(r.Uint32()), 0x14 // dmin about 0.001
		}
	}
	w, err := qgemm.Pack(typ, n, k, src)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestLinearMatrix checks LinearMatrix on every weight form against Linear on the float32
// widening of the same weights: half precision and widened rows bit for bit, quantized within the
// activation quantization's error (relative L2 below 1%); and that one goroutine gives
// the bits of several.
func TestLinearMatrix(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, s := range []LinearShape{
		{M: 1, N: 40, K: 256}, {M: 70, N: 33, K: 256, Act: GELU}, {M: 150, N: 64, K: 512, GEGLU: true},
		{M: 300, N: 96, K: 256, Act: SiLUAct},
	} {
		x, b := randSlice(r, s.M*s.K, 1), randSlice(r, s.N, 1)
		forms := map[string]func() (Matrix, []float32){}
		for _, h := range []gemm.Half{gemm.F16, gemm.BF16} {
			forms[h.String()] = func() (Matrix, []float32) {
				bits := make([]uint16, s.N*s.K)
				wide := make([]float32, len(bits))
				for i := range bits {
					bits[i] = uint16(r.Uint32())&0x83ff | 0x2000 // small normal values
					if h == gemm.BF16 {
						bits[i] = uint16(r.Uint32())&0x807f | 0x3c00
					}
					wide[i] = h.ToFloat32(bits[i])
				}
				packed := make([]uint16, gemm.HalfPackedLen(s.N, s.K))
				gemm.PackHalfRows(packed, s.N, s.K, bits, s.K)
				return Matrix{Half: h, Halfs: packed}, wide
			}
		}
		for _, typ := range []qgemm.Type{qgemm.Q8_0, qgemm.Q4_K} {
			forms[typ.String()] = func() (Matrix, []float32) {
				w := randomQuant(t, r, typ, s.N, s.K)
				wide := make([]float32, s.N*s.K)
				w.DequantizeRows(0, s.N, wide)
				return Matrix{Quant: w}, wide
			}
		}
		forms["rows"] = func() (Matrix, []float32) {
			wide := randSlice(r, s.N*s.K, 0.1)
			return Matrix{Rows: f32Rows{wide, s.K}}, wide
		}
		for name, form := range forms {
			t.Run(fmt.Sprintf("%s/%+v", name, s), func(t *testing.T) {
				m, wide := form()
				want := make([]float32, s.M*s.OutCols())
				Linear(want, x, wide, b, s)
				got := make([]float32, len(want))
				LinearMatrix(got, x, m, b, s)
				if m.Quant == nil {
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("element %d: %g, float32 weights %g", i, got[i], want[i])
						}
					}
				} else if rel := relL2(got, want); rel > 1e-2 {
					t.Fatalf("relative L2 error %.3g against float32 weights", rel)
				}
				old := runtime.GOMAXPROCS(1)
				one := make([]float32, len(got))
				LinearMatrix(one, x, m, b, s)
				runtime.GOMAXPROCS(old)
				for i := range one {
					if math.Float32bits(one[i]) != math.Float32bits(got[i]) {
						t.Fatalf("element %d: %g with one goroutine, %g with %d", i, one[i], got[i], old)
					}
				}
			})
		}
	}
}

// f32Rows is a RowDecoder of float32 rows; with it LinearMatrix takes the row-group path,
// which must give the float32 path's bits (the same sums; only the columns are grouped).
type f32Rows struct {
	w []float32
	k int
}

func (f f32Rows) DecodeRows(j0, j1 int, dst []float32) { copy(dst, f.w[j0*f.k:j1*f.k]) }

func relL2(got, want []float32) float64 {
	var num, den float64
	for i := range got {
		d := float64(got[i]) - float64(want[i])
		num += d * d
		den += float64(want[i]) * float64(want[i])
	}
	return math.Sqrt(num / den)
}

// BenchmarkLinearMatrix times a Wan 2.1 1.3B feed-forward input projection (1536 -> 8960,
// GELU-tanh) on 512 rows with the weight in each form.
func BenchmarkLinearMatrix(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	s := LinearShape{M: 512, N: 8960, K: 1536, Act: GELUTanh}
	x, bias, out := randSlice(r, s.M*s.K, 1), randSlice(r, s.N, 1), make([]float32, s.M*s.N)
	t := &testing.T{}
	bits := make([]uint16, s.N*s.K)
	for i := range bits {
		bits[i] = uint16(r.Uint32())&0x83ff | 0x2000
	}
	halfs := make([]uint16, gemm.HalfPackedLen(s.N, s.K))
	gemm.PackHalfRows(halfs, s.N, s.K, bits, s.K)
	for _, f := range []struct {
		name string
		m    Matrix
	}{
		{"f32", Matrix{F32: randSlice(r, s.N*s.K, 0.02)}},
		{"f16", Matrix{Half: gemm.F16, Halfs: halfs}},
		{"q8_0", Matrix{Quant: randomQuant(t, r, qgemm.Q8_0, s.N, s.K)}},
		{"q4_K", Matrix{Quant: randomQuant(t, r, qgemm.Q4_K, s.N, s.K)}},
	} {
		b.Run(f.name, func(b *testing.B) {
			for b.Loop() {
				LinearMatrix(out, x, f.m, bias, s)
			}
			b.ReportMetric(float64(2*s.M*s.N*s.K)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
