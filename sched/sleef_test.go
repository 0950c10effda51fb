package sched

import (
	"math"
	"path/filepath"
	"testing"
)

// TestSleefMatchesTorch checks the SLEEF ports bit for bit against torch 1.13's float32
// log, expm1 and exp (vectors from scripts/wanref/sleef_vectors.py).
func TestSleefMatchesTorch(t *testing.T) {
	v := readF32Safetensors(t, filepath.Join("testdata", "sleef_vectors.safetensors"))
	for _, c := range []struct {
		name string
		f    func(float32) float32
	}{{"log", sleefLogf}, {"expm1", sleefExpm1f}, {"exp", sleefExpf}} {
		in, want := v[c.name+"_in"], v[c.name+"_out"]
		if len(in) == 0 || len(in) != len(want) {
			t.Fatalf("%s: %d inputs, %d outputs", c.name, len(in), len(want))
		}
		bad := 0
		for i, x := range in {
			got := c.f(x)
			if math.Float32bits(got) != math.Float32bits(want[i]) && !(got != got && want[i] != want[i]) {
				if bad < 5 {
					t.Errorf("%s(%v) = %v, torch %v", c.name, x, got, want[i])
				}
				bad++
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d of %d differ", c.name, bad, len(in))
		}
	}
}

func TestFmaf32(t *testing.T) {
	// (1−2⁻²⁴)(1+2⁻²³) + 2⁻⁴⁷(1+2⁻²³) = 1 + 2⁻²⁴ + 2⁻⁷⁰: float64 rounds it to the float32
	// midpoint 1 + 2⁻²⁴, which float32(math.FMA(...)) would round to even (1); the exact
	// value is above the midpoint, so the correct float32 result is 1 + 2⁻²³.
	a, b := float32(1-1.0/(1<<24)), float32(1+1.0/(1<<23))
	c := float32(math.Ldexp(1+1.0/(1<<23), -47))
	if naive := float32(math.FMA(float64(a), float64(b), float64(c))); naive != 1 {
		t.Fatalf("test premise: naive FMA gave %v", naive)
	}
	if got, want := fmaf32(a, b, c), float32(1+1.0/(1<<23)); got != want {
		t.Errorf("fmaf32 = %v, want %v", got, want)
	}
	if got := fmaf32(-a, b, -c); got != -float32(1+1.0/(1<<23)) {
		t.Errorf("fmaf32 negative = %v", got)
	}
}
