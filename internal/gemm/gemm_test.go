package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
)

func naiveNT(m, n, k int, a, b []float32) []float64 {
	out := make([]float64, m*n)
	for i := range m {
		for j := range n {
			var s float64
			for p := range k {
				s += float64(a[i*k+p]) * float64(b[j*k+p])
			}
			out[i*n+j] = s
		}
	}
	return out
}

func randSlice(r *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(r.NormFloat64())
	}
	return s
}

func TestMulNTMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, sh := range [][3]int{
		{1, 1, 1}, {4, 16, 8}, {3, 5, 7}, {5, 17, 1}, {17, 33, 36}, {112, 32, 288},
		{64, 4, 288}, {14, 128, 64}, {130, 70, 9}, {896, 64, 576}, {7, 1, 0},
	} {
		m, n, k := sh[0], sh[1], sh[2]
		t.Run(fmt.Sprintf("%dx%dx%d", m, n, k), func(t *testing.T) {
			a, b := randSlice(r, m*k), randSlice(r, n*k)
			c := make([]float32, m*n)
			for i := range c {
				c[i] = float32(math.NaN()) // MulNT must overwrite, not accumulate
			}
			MulNT(m, n, k, a, b, c)
			want := naiveNT(m, n, k, a, b)
			for i := range c {
				// float32 sums of k products of unit normals: error grows like sqrt(k)·ε.
				tol := 1e-5 * (1 + math.Sqrt(float64(k))) * (1 + math.Abs(want[i]))
				if d := math.Abs(float64(c[i]) - want[i]); !(d <= tol) {
					t.Fatalf("c[%d] = %g, want %g (|diff| %g > %g)", i, c[i], want[i], d, tol)
				}
			}
		})
	}
}

// TestMulNTRowsIndependent checks the contract that a row's result does not depend on the
// rows computed with it: every row of a product equals the product of that row alone,
// bit for bit, serial or parallel.
func TestMulNTRowsIndependent(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	m, n, k := 203, 37, 300 // above parallelWork, ragged tiles
	a, b := randSlice(r, m*k), randSlice(r, n*k)
	full := make([]float32, m*n)
	MulNT(m, n, k, a, b, full)
	one := make([]float32, n)
	for i := range m {
		MulNT(1, n, k, a[i*k:(i+1)*k], b, one)
		for j := range n {
			if math.Float32bits(one[j]) != math.Float32bits(full[i*n+j]) {
				t.Fatalf("row %d col %d: alone %g, in the product %g", i, j, one[j], full[i*n+j])
			}
		}
	}
}

// TestKernelsAgree checks the assembly kernel against the portable one where both run.
func TestKernelsAgree(t *testing.T) {
	if !Accelerated() {
		t.Skipf("no accelerated kernel on %s", runtime.GOARCH)
	}
	r := rand.New(rand.NewPCG(5, 6))
	for _, k := range []int{1, 2, 9, 64, 1152} {
		a, b := randSlice(r, 4*k), randSlice(r, 16*k)
		asm, portable := make([]float32, 64), make([]float32, 64)
		kernel4x16(k, a, k, b, asm, 16)
		kernel4x16Go(k, a, k, b, portable, 16)
		for i := range asm {
			if d := math.Abs(float64(asm[i] - portable[i])); d > 1e-4*math.Sqrt(float64(k)) {
				t.Fatalf("k=%d: element %d asm %g, Go %g", k, i, asm[i], portable[i])
			}
		}
	}
}

func TestMulNTPanicsOnShortSlices(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("MulNT with a short slice did not panic")
		}
	}()
	MulNT(2, 2, 2, make([]float32, 3), make([]float32, 4), make([]float32, 4))
}

func BenchmarkMulNT(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, sh := range [][3]int{{896, 32, 288}, {448, 64, 576}, {3584, 128, 1152}, {14, 320, 128}} {
		m, n, k := sh[0], sh[1], sh[2]
		b.Run(fmt.Sprintf("%dx%dx%d", m, n, k), func(b *testing.B) {
			x, w, c := randSlice(r, m*k), randSlice(r, n*k), make([]float32, m*n)
			for b.Loop() {
				MulNT(m, n, k, x, w, c)
			}
			b.ReportMetric(float64(2*m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
