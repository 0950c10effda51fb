package kernels

import (
	"math"
	"testing"
)

func TestErfTanhAccuracy(t *testing.T) {
	for _, tc := range []struct {
		name   string
		f      func(float32) float32
		ref    func(float64) float64
		maxULP float64
	}{
		{"erf", Erf, math.Erf, 3},
		{"tanh", Tanh, math.Tanh, 2},
	} {
		worst, at := 0.0, float32(0)
		for i := -600000; i <= 600000; i++ {
			x := float32(i) * 1e-5 * 1.7
			got, want := tc.f(x), float32(tc.ref(float64(x)))
			if u := ulps(got, want); u > worst {
				worst, at = u, x
			}
		}
		if worst > tc.maxULP {
			t.Errorf("%s is %v ulp off at %g, want ≤ %v", tc.name, worst, at, tc.maxULP)
		}
		for _, x := range []float32{0, 1, -1, 4, -4, 9.5, -20, float32(math.Inf(1)), float32(math.Inf(-1))} {
			if got, want := tc.f(x), float32(tc.ref(float64(x))); ulps(got, want) > tc.maxULP {
				t.Errorf("%s(%g) = %g, want %g", tc.name, x, got, want)
			}
		}
		if got := tc.f(float32(math.NaN())); got == got {
			t.Errorf("%s(NaN) = %g", tc.name, got)
		}
	}
}

// TestSpecialSlicesMatchScalar checks the slice forms (vector code where the CPU has it)
// against the scalar functions bit for bit, special values included.
func TestSpecialSlicesMatchScalar(t *testing.T) {
	src := make([]float32, 0, 40000)
	for i := -20000; i < 20000; i++ {
		src = append(src, float32(i)*6e-4)
	}
	src = append(src, 0, float32(math.Copysign(0, -1)), 0.625, -0.625, 1, -1, 4, -4, 9, -9, 9.01, 1e-30,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 100, -100)
	geluScalar := func(kind Activation) func(float32) float32 {
		return func(x float32) float32 {
			row := []float32{x}
			old := vecExp
			vecExp = false
			activate(kind, row)
			vecExp = old
			return row[0]
		}
	}
	for _, tc := range []struct {
		name   string
		slice  func(dst, src []float32)
		scalar func(float32) float32
	}{
		{"erf", ErfSlice, Erf}, {"tanh", TanhSlice, Tanh},
		{"gelu", func(d, s []float32) { copy(d, s); activate(GELU, d) }, geluScalar(GELU)},
		{"gelu tanh", func(d, s []float32) { copy(d, s); activate(GELUTanh, d) }, geluScalar(GELUTanh)},
	} {
		dst := make([]float32, len(src))
		tc.slice(dst, src)
		for i, v := range dst {
			want := tc.scalar(src[i])
			if math.Float32bits(v) != math.Float32bits(want) && !(v != v && want != want) {
				t.Fatalf("%s(%g) = %g, scalar %g", tc.name, src[i], v, want)
			}
		}
	}
}
