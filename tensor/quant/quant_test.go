package quant

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"
)

func TestTable(t *testing.T) {
	for _, tc := range []struct {
		typ        Type
		id         uint32
		name, flag string
		block      int
		bytes      int
	}{
		{F32, 0, "f32", "f32", 1, 4},
		{F16, 1, "f16", "f16", 1, 2},
		{BF16, 30, "bf16", "bf16", 1, 2},
		{Q8_0, 8, "q8_0", "q8_0", 32, 34},
		{Q4_0, 2, "q4_0", "q4_0", 32, 18},
		{Q4_1, 3, "q4_1", "q4_1", 32, 20},
		{Q5_0, 6, "q5_0", "q5_0", 32, 22},
		{Q5_1, 7, "q5_1", "q5_1", 32, 24},
		{Q2_K, 10, "q2_K", "q2_k", 256, 84},
		{Q3_K, 11, "q3_K", "q3_k", 256, 110},
		{Q4_K, 12, "q4_K", "q4_k", 256, 144},
		{Q5_K, 13, "q5_K", "q5_k", 256, 176},
		{Q6_K, 14, "q6_K", "q6_k", 256, 210},
	} {
		in, ok := tc.typ.Info()
		if !ok || uint32(tc.typ) != tc.id || in.Name != tc.name || in.Flag != tc.flag ||
			in.BlockSize != tc.block || in.BlockBytes != tc.bytes || in.Quantized != (tc.block > 1) {
			t.Errorf("%v: %+v, want id %d %s/%s %d weights in %d bytes", tc.typ, in, tc.id, tc.name, tc.flag, tc.block, tc.bytes)
		}
		for _, s := range []string{tc.name, tc.flag, strings.ToUpper(tc.name)} {
			if got, err := Parse(s); err != nil || got != tc.typ {
				t.Errorf("Parse(%q) = %v, %v", s, got, err)
			}
		}
	}
	if len(Types()) != 13 {
		t.Errorf("%d types, the test lists 13", len(Types()))
	}
	if _, err := Parse("iq2_xxs"); err == nil || !strings.Contains(err.Error(), "q8_0") {
		t.Errorf("Parse(iq2_xxs) = %v, want an error listing the types", err)
	}
	if Type(16).Known() || Type(16).String() != "ggml type 16" {
		t.Errorf("IQ2_XXS is %q, known %v", Type(16).String(), Type(16).Known())
	}
}

func TestRowBytes(t *testing.T) {
	for _, tc := range []struct {
		typ  Type
		n    int
		want int
		err  bool
	}{
		{Q8_0, 64, 68, false}, {Q8_0, 33, 0, true}, {Q4_K, 5120, 20 * 144, false},
		{Q4_K, 64, 0, true}, {F16, 3, 6, false}, {Type(99), 32, 0, true}, {Q8_0, -32, 0, true},
	} {
		got, err := tc.typ.RowBytes(tc.n)
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("%v.RowBytes(%d) = %d, %v", tc.typ, tc.n, got, err)
		}
	}
	if b, err := Q8_0.Bytes(5120*1536, 1536); err != nil || b != 5120*48*34 {
		t.Errorf("Bytes = %d, %v", b, err)
	}
}

func TestFallback(t *testing.T) {
	for _, tc := range []struct {
		asked, stored Type
		row           int
		want          Type
	}{
		{Q4_K, BF16, 5120, Q4_K},
		{Q4_K, BF16, 64, Q5_0},  // Wan's patch embedding rows (16 channels x 2 x 2)
		{Q6_K, F32, 192, Q8_0},  // TI2V's patch embedding rows (48 x 2 x 2)
		{Q5_K, F16, 2880, Q5_1}, // SVD's 3x3 convolutions over 320 channels
		{Q2_K, F16, 96, Q4_0},
		{Q8_0, BF16, 20, BF16}, // no block type fits: kept as stored
		{Q4_K, F32, 4, F32},
		{Q8_0, Q4_K, 20, F16}, // stored in a block type that cannot hold it either: f16
		{F16, F32, 3, F16},
	} {
		if got := tc.asked.Fallback(tc.row, tc.stored); got != tc.want {
			t.Errorf("%v for rows of %d stored as %v: %v, want %v", tc.asked, tc.row, tc.stored, got, tc.want)
		}
	}
}

// TestHalfRoundTrip checks the half conversions on every half: float32 and back gives the
// same bits (NaNs made quiet).
func TestHalfRoundTrip(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := HalfToFloat32(uint16(h))
		back := Float32ToHalf(f)
		isNaN := h&0x7c00 == 0x7c00 && h&0x3ff != 0
		switch {
		case isNaN && !math.IsNaN(float64(f)):
			t.Fatalf("half %#04x is a NaN, float32 %v", h, f)
		case !isNaN && back != uint16(h):
			t.Fatalf("half %#04x -> %v -> %#04x", h, f, back)
		}
		if b := uint16(h); BFloat16ToFloat32(b) != math.Float32frombits(uint32(b)<<16) && !isNaN {
			t.Fatalf("bf16 %#04x", b)
		}
	}
}

// roundTripBound is the largest error, as a fraction of a block's largest magnitude, that
// dequantizing a quantized block may show: a loose bound that catches a wrong layout, not a
// statement about accuracy (the golden files pin the exact values).
var roundTripBound = map[Type]float64{
	F32: 0, F16: 1.0 / 2048, BF16: 1.0 / 256,
	Q8_0: 0.6 / 127, Q6_K: 0.04, Q5_K: 0.07, Q5_1: 0.04, Q5_0: 0.07,
	Q4_K: 0.14, Q4_1: 0.07, Q4_0: 0.13, Q3_K: 0.4, Q2_K: 0.7,
}

func checkRoundTrip(t *testing.T, typ Type, x []float32) {
	t.Helper()
	q, err := Quantize(typ, x)
	if err != nil {
		t.Fatal(err)
	}
	y := make([]float32, len(x))
	if err := Dequantize(typ, q, y); err != nil {
		t.Fatal(err)
	}
	bs := max(typ.BlockSize(), 1)
	for b := 0; b < len(x)/bs; b++ {
		var amax float64
		for _, v := range x[b*bs : (b+1)*bs] {
			amax = max(amax, math.Abs(float64(v)))
		}
		for j := b * bs; j < (b+1)*bs; j++ {
			// 1e-4: the absolute error of scales that are subnormal halves.
			if d := math.Abs(float64(x[j] - y[j])); d > roundTripBound[typ]*amax+1e-4 || math.IsNaN(d) {
				t.Fatalf("%v: weight %d is %v, dequantized %v (block max %v)", typ, j, x[j], y[j], amax)
			}
		}
	}
}

func TestRoundTrip(t *testing.T) {
	x := goldenInputs()[:5*goldenPerRow] // the last golden row holds values beyond a half
	for _, typ := range Types() {
		checkRoundTrip(t, typ, x)
	}
}

func TestErrors(t *testing.T) {
	if _, err := Quantize(Q8_0, make([]float32, 31)); err == nil {
		t.Error("Quantize of 31 weights as q8_0 succeeded")
	}
	if err := Dequantize(Q4_K, make([]byte, 143), make([]float32, 256)); err == nil {
		t.Error("Dequantize of 143 bytes as a q4_K block succeeded")
	}
	if err := QuantizeTo(Q4_0, make([]byte, 17), make([]float32, 32)); err == nil {
		t.Error("QuantizeTo into 17 bytes succeeded")
	}
	if _, err := Quantize(Type(16), make([]float32, 256)); err == nil {
		t.Error("Quantize to IQ2_XXS succeeded")
	}
}

func fuzzType(sel uint8) Type { ts := Types(); return ts[int(sel)%len(ts)] }

// FuzzDequantize feeds arbitrary bytes to every dequantizer: no panic, a float per weight.
func FuzzDequantize(f *testing.F) {
	f.Add(uint8(3), goldenRandom()[:256])
	f.Add(uint8(8), []byte{0xff, 0x7c, 1, 2, 3})
	f.Fuzz(func(t *testing.T, sel uint8, b []byte) {
		typ := fuzzType(sel)
		nb := len(b) / typ.BlockBytes()
		y := make([]float32, nb*typ.BlockSize())
		if err := Dequantize(typ, b[:nb*typ.BlockBytes()], y); err != nil {
			t.Fatal(err)
		}
		if len(b)%typ.BlockBytes() != 0 {
			if err := Dequantize(typ, b, y); err == nil {
				t.Fatalf("%v: %d bytes for %d weights accepted", typ, len(b), len(y))
			}
		}
	})
}

// FuzzRoundTrip quantizes arbitrary weights (folded into ±1000, where every scale is a
// finite half) and checks the dequantized values against the type's error bound.
func FuzzRoundTrip(f *testing.F) {
	f.Add(uint8(3), goldenRandom()[:1024])
	f.Add(uint8(11), make([]byte, 1024))
	f.Fuzz(func(t *testing.T, sel uint8, b []byte) {
		typ := fuzzType(sel)
		n := len(b) / 4 / typ.BlockSize() * typ.BlockSize()
		x := make([]float32, n)
		for i := range x {
			v := math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				v = 0
			}
			x[i] = float32(math.Mod(float64(v), 1000))
		}
		checkRoundTrip(t, typ, x)
	})
}
