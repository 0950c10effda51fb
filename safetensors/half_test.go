package safetensors

import (
	"math"
	"math/rand"
	"testing"
)

func TestHalfKnownValues(t *testing.T) {
	cases := []struct {
		h    uint16
		want float32
	}{
		{0x0000, 0},
		{0x3c00, 1},
		{0xc000, -2},
		{0x7bff, 65504},
		{0x0001, float32(math.Ldexp(1, -24))}, // smallest subnormal
		{0x03ff, float32(math.Ldexp(1023, -24))},
		{0x0400, float32(math.Ldexp(1, -14))}, // smallest normal
		{0x3555, 0.333251953125},
		{0x7c00, float32(math.Inf(1))},
		{0xfc00, float32(math.Inf(-1))},
	}
	for _, c := range cases {
		if got := HalfToFloat32(c.h); got != c.want {
			t.Errorf("HalfToFloat32(%#04x) = %g, want %g", c.h, got, c.want)
		}
		if got := Float32ToHalf(c.want); got != c.h {
			t.Errorf("Float32ToHalf(%g) = %#04x, want %#04x", c.want, got, c.h)
		}
	}
	if got := HalfToFloat32(0x8000); got != 0 || !math.Signbit(float64(got)) {
		t.Errorf("HalfToFloat32(0x8000) = %g, want -0", got)
	}
	for _, h := range []uint16{0x7e00, 0x7c01, 0xfe00} {
		if got := HalfToFloat32(h); !math.IsNaN(float64(got)) {
			t.Errorf("HalfToFloat32(%#04x) = %g, want NaN", h, got)
		}
	}
	if h := Float32ToHalf(float32(math.NaN())); h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
		t.Errorf("Float32ToHalf(NaN) = %#04x, not a NaN", h)
	}
}

// TestHalfRoundTripExhaustive: every binary16 value survives half -> float32 -> half.
func TestHalfRoundTripExhaustive(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		f := HalfToFloat32(h)
		if math.IsNaN(float64(f)) {
			if back := Float32ToHalf(f); back != h {
				t.Fatalf("NaN %#04x -> %#04x", h, back)
			}
			continue
		}
		// Cross-check the value against the definition in float64.
		exp := int(h>>10) & 0x1f
		mant := float64(h & 0x3ff)
		var want float64
		switch exp {
		case 0:
			want = math.Ldexp(mant, -24)
		case 0x1f:
			want = math.Inf(1)
		default:
			want = math.Ldexp(1024+mant, exp-25)
		}
		if h&0x8000 != 0 {
			want = -want
		}
		if float64(f) != want {
			t.Fatalf("HalfToFloat32(%#04x) = %g, want %g", h, f, want)
		}
		if back := Float32ToHalf(f); back != h {
			t.Fatalf("round trip %#04x -> %g -> %#04x", h, f, back)
		}
		if lut := halfLUT()[h]; math.Float32bits(lut) != math.Float32bits(f) {
			t.Fatalf("table[%#04x] = %g, want %g", h, lut, f)
		}
	}
}

func TestFloat32ToHalfRounding(t *testing.T) {
	cases := []struct {
		f    float64
		want uint16
	}{
		{1 + math.Ldexp(1, -11), 0x3c00},   // tie, even is 1.0
		{1 + 3*math.Ldexp(1, -11), 0x3c02}, // tie, even is up
		{1 + math.Ldexp(1, -11) + math.Ldexp(1, -20), 0x3c01},
		{65519, 0x7bff},
		{65520, 0x7c00}, // tie between 65504 and "65536" rounds to infinity
		{1e10, 0x7c00},
		{math.Ldexp(1, -25), 0x0000}, // tie between 0 and the smallest subnormal
		{math.Ldexp(1, -25) * (1 + math.Ldexp(1, -20)), 0x0001}, // just above the tie
		{math.Ldexp(3, -25), 0x0002},                            // tie 1.5 ulp -> even (2)
		{math.Ldexp(1, -30), 0x0000},
		{math.Ldexp(1, -14) - math.Ldexp(1, -26), 0x0400}, // rounds up into the normals
		{-1e-45, 0x8000},
	}
	for _, c := range cases {
		if got := Float32ToHalf(float32(c.f)); got != c.want {
			t.Errorf("Float32ToHalf(%g) = %#04x, want %#04x", c.f, got, c.want)
		}
	}
}

// TestFloat32ToHalfNearest: for random floats the result is the nearest half, ties to even.
func TestFloat32ToHalfNearest(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 200000; i++ {
		f := math.Float32frombits(rng.Uint32())
		if math.IsNaN(float64(f)) || math.Abs(float64(f)) >= 65520 {
			continue
		}
		h := Float32ToHalf(f)
		got := float64(HalfToFloat32(h))
		d := math.Abs(float64(f) - got)
		for _, nb := range []uint16{h + 1, h - 1, h ^ 0x8000} {
			v := float64(HalfToFloat32(nb))
			if math.IsNaN(v) || math.IsInf(v, 0) {
				continue
			}
			dn := math.Abs(float64(f) - v)
			if dn < d || (dn == d && h&1 == 1 && nb&1 == 0 && v != got) {
				t.Fatalf("Float32ToHalf(%g) = %#04x (%g), but %#04x (%g) is nearer or an even tie", f, h, got, nb, v)
			}
		}
	}
}

func TestBFloat16(t *testing.T) {
	cases := []struct {
		f    float32
		want uint16
	}{
		{1, 0x3f80},
		{-2, 0xc000},
		{float32(math.Inf(1)), 0x7f80},
		{math.Float32frombits(0x3f808000), 0x3f80}, // tie, even stays
		{math.Float32frombits(0x3f818000), 0x3f82}, // tie, rounds up to even
		{math.Float32frombits(0x3f808001), 0x3f81},
	}
	for _, c := range cases {
		if got := Float32ToBFloat16(c.f); got != c.want {
			t.Errorf("Float32ToBFloat16(%g) = %#04x, want %#04x", c.f, got, c.want)
		}
	}
	for i := 0; i < 1<<16; i++ {
		f := BFloat16ToFloat32(uint16(i))
		if math.IsNaN(float64(f)) {
			if !math.IsNaN(float64(BFloat16ToFloat32(Float32ToBFloat16(f)))) {
				t.Fatalf("NaN %#04x lost", i)
			}
			continue
		}
		if back := Float32ToBFloat16(f); back != uint16(i) {
			t.Fatalf("bf16 round trip %#04x -> %#04x", i, back)
		}
	}
}
