package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// ulps is the distance between a and b in float32 units of the last place.
func ulps(a, b float32) float64 {
	ia, ib := int64(math.Float32bits(a)), int64(math.Float32bits(b))
	return math.Abs(float64(ia - ib))
}

func TestExpAccuracy(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	worst := 0.0
	for range 200000 {
		x := float32(r.Float64()*176 - 88)
		got := Exp(x)
		want := float32(math.Exp(float64(x)))
		if want < math.SmallestNonzeroFloat32*(1<<23) { // below the normal range Exp flushes
			continue
		}
		worst = max(worst, ulps(got, want))
	}
	if worst > 2 {
		t.Fatalf("Exp is %v ulp from math.Exp at worst, want ≤ 2", worst)
	}
	for _, tc := range []struct{ x, want float32 }{
		{0, 1}, {-100, 0}, {float32(math.Inf(-1)), 0}, {100, float32(math.Inf(1))},
	} {
		if got := Exp(tc.x); got != tc.want {
			t.Errorf("Exp(%g) = %g, want %g", tc.x, got, tc.want)
		}
	}
	if got := Exp(float32(math.NaN())); got == got {
		t.Errorf("Exp(NaN) = %g", got)
	}
}

// TestSliceFormsMatchScalar checks that the slice forms (vector code where the CPU has it)
// give the bits of the scalar functions, including special values and ragged tails.
func TestSliceFormsMatchScalar(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	src := make([]float32, 1003)
	for i := range src {
		src[i] = float32(r.Float64()*200 - 100)
	}
	special := []float32{0, -0, 1, -1, 88.3, 88.5, 88.72, 88.8, -87.3, -87.4, -200, 200,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 1e-30, -1e-30}
	copy(src, special)
	for _, tc := range []struct {
		name   string
		slice  func(dst, src []float32)
		scalar func(float32) float32
	}{
		{"exp", ExpSlice, Exp}, {"sigmoid", SigmoidSlice, Sigmoid}, {"silu", SiLUSlice, SiLU},
	} {
		for _, n := range []int{0, 1, 7, 8, 9, len(src)} {
			dst := make([]float32, n)
			tc.slice(dst, src[:n])
			for i, v := range dst {
				want := tc.scalar(src[i])
				if math.Float32bits(v) != math.Float32bits(want) && !(v != v && want != want) {
					t.Fatalf("%s(%g) = %g, scalar %g", tc.name, src[i], v, want)
				}
			}
		}
	}
	// expSubSum: the same values as Exp(x − m); the sum within float32 rounding.
	s := append([]float32(nil), src[100:337]...)
	m := maxOf(s)
	want := make([]float32, len(s))
	var sum float64
	for i, v := range s {
		want[i] = Exp(v - m)
		sum += float64(want[i])
	}
	got := expSubSum(s, m)
	for i := range s {
		if s[i] != want[i] {
			t.Fatalf("expSubSum element %d = %g, want %g", i, s[i], want[i])
		}
	}
	if math.Abs(float64(got)-sum) > 1e-6*sum {
		t.Fatalf("expSubSum sum %g, want %g", got, sum)
	}
}

func BenchmarkExpSlice(b *testing.B) {
	src := make([]float32, 4096)
	for i := range src {
		src[i] = float32(i%200) - 100
	}
	dst := make([]float32, len(src))
	for b.Loop() {
		ExpSlice(dst, src)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(src)), "ns/elem")
}
