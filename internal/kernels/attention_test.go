package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
)

func randSlice(r *rand.Rand, n int, scale float64) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(r.NormFloat64() * scale)
	}
	return s
}

// naiveAttention is the float64 reference.
func naiveAttention(q, k, v, bias []float32, a AttentionShape) []float64 {
	hd := a.H * a.D
	out := make([]float64, a.B*a.Sq*hd)
	for b := range a.B {
		for h := range a.H {
			for i := range a.Sq {
				s := make([]float64, a.Sk)
				m := math.Inf(-1)
				for j := range a.Sk {
					var dot float64
					for d := range a.D {
						dot += float64(q[(b*a.Sq+i)*hd+h*a.D+d]) * float64(k[(b*a.Sk+j)*hd+h*a.D+d])
					}
					s[j] = dot * float64(a.Scale)
					if a.BiasBatch > 0 {
						s[j] += float64(bias[(((b%a.BiasBatch)*a.H+h)*a.Sq+i)*a.Sk+j])
					}
					m = max(m, s[j])
				}
				var sum float64
				for j := range s {
					s[j] = math.Exp(s[j] - m)
					sum += s[j]
				}
				for d := range a.D {
					var acc float64
					for j := range a.Sk {
						acc += s[j] * float64(v[(b*a.Sk+j)*hd+h*a.D+d])
					}
					out[(b*a.Sq+i)*hd+h*a.D+d] = acc / sum
				}
			}
		}
	}
	return out
}

func TestAttentionMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, a := range []AttentionShape{
		{B: 1, Sq: 1, Sk: 1, H: 1, D: 1, Scale: 1},
		{B: 2, Sq: 14, Sk: 14, H: 1, D: 32, Scale: 0.17},
		{B: 3, Sq: 70, Sk: 33, H: 2, D: 8, Scale: 0.35, BiasBatch: 1},
		{B: 2, Sq: 9, Sk: 700, H: 3, D: 16, Scale: 0.25, BiasBatch: 2},
		{B: 1, Sq: 130, Sk: 77, H: 2, D: 40, Scale: 0.158},
	} {
		t.Run(fmt.Sprintf("%+v", a), func(t *testing.T) {
			hd := a.H * a.D
			q, k, v := randSlice(r, a.B*a.Sq*hd, 1), randSlice(r, a.B*a.Sk*hd, 1), randSlice(r, a.B*a.Sk*hd, 1)
			var bias []float32
			if a.BiasBatch > 0 {
				bias = randSlice(r, a.BiasBatch*a.H*a.Sq*a.Sk, 1)
			}
			out := make([]float32, len(q))
			Attention(out, q, k, v, bias, a)
			want := naiveAttention(q, k, v, bias, a)
			for i := range out {
				if d := math.Abs(float64(out[i]) - want[i]); !(d <= 2e-5*(1+math.Abs(want[i]))) {
					t.Fatalf("out[%d] = %g, want %g", i, out[i], want[i])
				}
			}
		})
	}
}

// TestAttentionSplitInvariant checks the kernel contract: the same bits for any
// GOMAXPROCS, and a batch row's result alone equals its result in the batch.
func TestAttentionSplitInvariant(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	a := AttentionShape{B: 3, Sq: 100, Sk: 90, H: 2, D: 24, Scale: 0.2}
	hd := a.H * a.D
	q, k, v := randSlice(r, a.B*a.Sq*hd, 1), randSlice(r, a.B*a.Sk*hd, 1), randSlice(r, a.B*a.Sk*hd, 1)
	full := make([]float32, len(q))
	Attention(full, q, k, v, nil, a)
	old := runtime.GOMAXPROCS(1)
	serial := make([]float32, len(q))
	Attention(serial, q, k, v, nil, a)
	runtime.GOMAXPROCS(old)
	one := a
	one.B = 1
	for b := range a.B {
		row := make([]float32, a.Sq*hd)
		Attention(row, q[b*a.Sq*hd:], k[b*a.Sk*hd:], v[b*a.Sk*hd:], nil, one)
		for i, x := range row {
			j := b*a.Sq*hd + i
			if math.Float32bits(x) != math.Float32bits(full[j]) || math.Float32bits(serial[j]) != math.Float32bits(full[j]) {
				t.Fatalf("element %d: alone %g, serial %g, batched %g", j, x, serial[j], full[j])
			}
		}
	}
}
