package safetensors

import (
	"math"
	"sync"
)

// HalfToFloat32 converts an IEEE 754 binary16 value (given by its bits) to float32. The
// conversion is exact for every input: subnormals, infinities and NaN payloads included.
func HalfToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0 && mant == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal: mant * 2^-24, renormalise
		e := uint32(127 - 14)
		for mant&0x400 == 0 {
			mant <<= 1
			e--
		}
		mant &= 0x3ff
		return math.Float32frombits(sign | e<<23 | mant<<13)
	case exp == 0x1f: // Inf or NaN, payload kept
		return math.Float32frombits(sign | 0xff<<23 | mant<<13)
	default:
		return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
	}
}

// Float32ToHalf converts f to IEEE 754 binary16 bits, rounding to nearest, ties to even
// (what PyTorch's .half() does). Overflow gives an infinity; NaN stays NaN.
func Float32ToHalf(f float32) uint16 {
	bits := math.Float32bits(f)
	sign := uint16(bits>>16) & 0x8000
	exp := int32(bits>>23) & 0xff
	mant := bits & 0x7fffff
	if exp == 0xff {
		if mant == 0 {
			return sign | 0x7c00
		}
		m := uint16(mant >> 13)
		if m == 0 {
			m = 0x200
		}
		return sign | 0x7c00 | m
	}
	e := exp - 127 + 15
	if e >= 31 {
		return sign | 0x7c00
	}
	if e <= 0 { // result is subnormal or zero
		if exp == 0 { // float32 zero or subnormal: far below the half range
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
		h++ // a carry into the exponent is the correct result, up to infinity
	}
	return sign | uint16(h)
}

// BFloat16ToFloat32 converts bfloat16 bits to float32 (exact).
func BFloat16ToFloat32(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }

// Float32ToBFloat16 converts f to bfloat16 bits, rounding to nearest, ties to even; NaN
// stays NaN.
func Float32ToBFloat16(f float32) uint16 {
	bits := math.Float32bits(f)
	if bits&0x7fffffff > 0x7f800000 {
		return uint16(bits>>16) | 0x40
	}
	bits += 0x7fff + (bits>>16)&1
	return uint16(bits >> 16)
}

var (
	halfTableOnce sync.Once
	halfTable     []float32
)

// halfLUT returns the 65536-entry binary16 -> float32 table used for bulk conversion.
func halfLUT() []float32 {
	halfTableOnce.Do(func() {
		halfTable = make([]float32, 1<<16)
		for i := range halfTable {
			halfTable[i] = HalfToFloat32(uint16(i))
		}
	})
	return halfTable
}

func float32frombits(b uint32) float32 { return math.Float32frombits(b) }
func float64frombits(b uint64) float64 { return math.Float64frombits(b) }
