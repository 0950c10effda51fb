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
