package quant

import "math"

// HalfToFloat32 converts IEEE binary16 bits to float32, as ggml's GGML_FP16_TO_FP32 does:
// exact for every finite value and infinity; a NaN stays a NaN of the same sign and payload,
// made quiet (what the x86 conversion instruction and ggml's portable code both give).
func HalfToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0 && mant == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal: mant * 2^-24, renormalised
		e := uint32(127 - 14)
		for mant&0x400 == 0 {
			mant <<= 1
			e--
		}
		return math.Float32frombits(sign | e<<23 | (mant&0x3ff)<<13)
	case exp == 0x1f && mant == 0:
		return math.Float32frombits(sign | 0xff<<23)
	case exp == 0x1f:
		return math.Float32frombits(sign | 0xff<<23 | 1<<22 | mant<<13)
	default:
		return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
	}
}

// Float32ToHalf converts f to IEEE binary16 bits as ggml's GGML_FP32_TO_FP16 does: round to
// nearest, ties to even, overflow to infinity, subnormal halves where the value is below
// 2^-14; a NaN becomes 0x7e00 with f's sign.
func Float32ToHalf(f float32) uint16 {
	bits := math.Float32bits(f)
	sign := uint16(bits>>16) & 0x8000
	exp := int32(bits>>23) & 0xff
	mant := bits & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 31 {
		return sign | 0x7c00
	}
	if e <= 0 { // subnormal half or zero
		if exp == 0 {
			return sign
		}
		mant |= 0x800000
		shift := uint32(14 - e)
		if shift > 24 {
			return sign
		}
		h := mant >> shift
		rem := mant & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || (rem == half && h&1 == 1) {
			h++
		}
		return sign | uint16(h)
	}
	h := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && h&1 == 1) {
		h++ // a carry into the exponent is the right result, up to infinity
	}
	return sign | uint16(h)
}

// BFloat16ToFloat32 converts bfloat16 bits to float32 (exact).
func BFloat16ToFloat32(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }

// Float32ToBFloat16 converts f to bfloat16 bits as ggml's GGML_FP32_TO_BF16 does: round to
// nearest, ties to even; a NaN keeps its top bits and is made quiet.
func Float32ToBFloat16(f float32) uint16 {
	bits := math.Float32bits(f)
	if bits&0x7fffffff > 0x7f800000 {
		return uint16(bits>>16) | 0x40
	}
	bits += 0x7fff + (bits>>16)&1
	return uint16(bits >> 16)
}

// halfTable holds HalfToFloat32 of every half, for the row conversions.
var halfTable = func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for i := range t {
		t[i] = HalfToFloat32(uint16(i))
	}
	return &t
}()

// fp16 reads the little-endian half at b[0:2] as float32.
func fp16(b []byte) float32 { return halfTable[uint16(b[0])|uint16(b[1])<<8] }

// putFP16 writes f as a little-endian half at b[0:2].
func putFP16(b []byte, f float32) {
	h := Float32ToHalf(f)
	b[0], b[1] = byte(h), byte(h>>8)
}
