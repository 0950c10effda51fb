package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
)

func TestLinear(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	gelu := func(v float64) float64 { return 0.5 * v * (1 + math.Erf(v/math.Sqrt2)) }
	geluTanh := func(v float64) float64 {
		return 0.5 * v * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(v+0.044715*v*v*v)))
	}
	for _, s := range []LinearShape{
		{M: 1, N: 1, K: 1}, {M: 70, N: 33, K: 20}, {M: 130, N: 48, K: 64, Act: GELU},
		{M: 65, N: 17, K: 9, Act: GELUTanh}, {M: 5, N: 40, K: 7, Act: SiLUAct}, {M: 150, N: 40, K: 30, GEGLU: true},
	} {
		t.Run(fmt.Sprintf("%+v", s), func(t *testing.T) {
			x, w, b := randSlice(r, s.M*s.K, 1), randSlice(r, s.N*s.K, 1), randSlice(r, s.N, 1)
			y := make([]float64, s.M*s.N)
			for i := range s.M {
				for j := range s.N {
					var acc float64
					for p := range s.K {
						acc += float64(x[i*s.K+p]) * float64(w[j*s.K+p])
					}
					v := acc + float64(b[j])
					switch s.Act {
					case GELU:
						v = gelu(v)
					case GELUTanh:
						v = geluTanh(v)
					case SiLUAct:
						v = silu64(v)
					}
					y[i*s.N+j] = v
				}
			}
			want := y
			if s.GEGLU {
				h := s.N / 2
				want = make([]float64, s.M*h)
				for i := range s.M {
					for j := range h {
						want[i*h+j] = y[i*s.N+j] * gelu(y[i*s.N+h+j])
					}
				}
			}
			out := make([]float32, s.M*s.OutCols())
			Linear(out, x, w, b, s)
			closeTo(t, "linear", out, want, 1e-5*math.Sqrt(float64(s.K)))
			old := runtime.GOMAXPROCS(1)
			one := make([]float32, len(out))
			Linear(one, x, w, b, s)
			runtime.GOMAXPROCS(old)
			for i := range one {
				if math.Float32bits(one[i]) != math.Float32bits(out[i]) {
					t.Fatalf("element %d: %g with one goroutine, %g with %d", i, one[i], out[i], old)
				}
			}
		})
	}
}
