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
