package quant

import (
	"encoding/binary"
	"math"
)

// The blocks of 32 weights: ggml-quants.c's quantize_row_q{4_0,4_1,5_0,5_1,8_0}_ref and
// dequantize_row_* written again in Go, operation for operation in float32. Every product
// that C adds to something is rounded first (an explicit float32 conversion), so no Go
// compiler fuses it into a multiply-add: ggml's reference build (ggml-base, compiled for the
// baseline x86-64 without FMA) rounds every operation.

const qk = 32 // weights in a block of the 32-weight types

func absMax(x []float32) (amax, max float32) {
	for _, v := range x {
		if a := abs32(v); amax < a {
			amax, max = a, v
		}
	}
	return amax, max
}

func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

// truncInt8 is C's (int8_t) conversion of a float in int8's range: towards zero. Out of
// range (NaN, an infinity or a huge weight, where C's behaviour is undefined) it gives the
// low byte of Go's conversion, so that nothing panics.
func truncInt8(v float32) int8 {
	if !(v > -129 && v < 128) {
		return int8(int64(v))
	}
	return int8(v)
}

func quantizeQ4_0(dst []byte, x []float32) {
	for i := 0; i < len(x)/qk; i++ {
		xb, y := x[i*qk:(i+1)*qk], dst[i*18:(i+1)*18]
		_, max := absMax(xb)
		d := max / -8
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putFP16(y[0:], d)
		for j := 0; j < qk/2; j++ {
			x0 := float32(xb[j] * id)
			x1 := float32(xb[qk/2+j] * id)
			xi0 := uint8(min(15, truncInt8(x0+8.5)))
			xi1 := uint8(min(15, truncInt8(x1+8.5)))
			y[2+j] = xi0 | xi1<<4
		}
	}
}

func dequantizeQ4_0(dst []float32, src []byte) {
	for i := 0; i < len(dst)/qk; i++ {
		b, y := src[i*18:(i+1)*18], dst[i*qk:(i+1)*qk]
		d := fp16(b)
		for j := 0; j < qk/2; j++ {
			y[j] = float32(int32(b[2+j]&0x0f)-8) * d
			y[j+qk/2] = float32(int32(b[2+j]>>4)-8) * d
		}
	}
}

func minMax(x []float32) (lo, hi float32) {
	lo, hi = math.MaxFloat32, -math.MaxFloat32
	for _, v := range x {
		if v < lo {
			lo = v
		}
		if v > hi {
			hi = v
		}
	}
	return lo, hi
}

func quantizeQ4_1(dst []byte, x []float32) {
	for i := 0; i < len(x)/qk; i++ {
		xb, y := x[i*qk:(i+1)*qk], dst[i*20:(i+1)*20]
		lo, hi := minMax(xb)
		d := (hi - lo) / 15
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putFP16(y[0:], d)
		putFP16(y[2:], lo)
		for j := 0; j < qk/2; j++ {
			x0 := float32((xb[j] - lo) * id)
			x1 := float32((xb[qk/2+j] - lo) * id)
			xi0 := uint8(min(15, truncInt8(x0+0.5)))
			xi1 := uint8(min(15, truncInt8(x1+0.5)))
			y[4+j] = xi0 | xi1<<4
		}
	}
}

func dequantizeQ4_1(dst []float32, src []byte) {
	for i := 0; i < len(dst)/qk; i++ {
		b, y := src[i*20:(i+1)*20], dst[i*qk:(i+1)*qk]
		d, m := fp16(b), fp16(b[2:])
		for j := 0; j < qk/2; j++ {
			y[j] = float32(float32(b[4+j]&0x0f)*d) + m
			y[j+qk/2] = float32(float32(b[4+j]>>4)*d) + m
		}
	}
}

func quantizeQ5_0(dst []byte, x []float32) {
	for i := 0; i < len(x)/qk; i++ {
		xb, y := x[i*qk:(i+1)*qk], dst[i*22:(i+1)*22]
		_, max := absMax(xb)
		d := max / -16
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putFP16(y[0:], d)
		var qh uint32
		for j := 0; j < qk/2; j++ {
			x0 := float32(xb[j] * id)
			x1 := float32(xb[qk/2+j] * id)
			xi0 := uint8(min(31, truncInt8(x0+16.5)))
			xi1 := uint8(min(31, truncInt8(x1+16.5)))
			y[6+j] = xi0&0x0f | (xi1&0x0f)<<4
			qh |= uint32(xi0&0x10) >> 4 << j
			qh |= uint32(xi1&0x10) >> 4 << (j + qk/2)
		}
		binary.LittleEndian.PutUint32(y[2:], qh)
	}
}

func dequantizeQ5_0(dst []float32, src []byte) {
	for i := 0; i < len(dst)/qk; i++ {
		b, y := src[i*22:(i+1)*22], dst[i*qk:(i+1)*qk]
		d := fp16(b)
		qh := binary.LittleEndian.Uint32(b[2:])
		for j := 0; j < qk/2; j++ {
			xh0 := uint8(qh>>j<<4) & 0x10
			xh1 := uint8(qh>>(j+12)) & 0x10
			y[j] = float32(int32(b[6+j]&0x0f|xh0)-16) * d
			y[j+qk/2] = float32(int32(b[6+j]>>4|xh1)-16) * d
		}
	}
}

func quantizeQ5_1(dst []byte, x []float32) {
	for i := 0; i < len(x)/qk; i++ {
		xb, y := x[i*qk:(i+1)*qk], dst[i*24:(i+1)*24]
		lo, hi := minMax(xb)
		d := (hi - lo) / 31
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putFP16(y[0:], d)
		putFP16(y[2:], lo)
		var qh uint32
		for j := 0; j < qk/2; j++ {
			x0 := float32((xb[j] - lo) * id)
			x1 := float32((xb[qk/2+j] - lo) * id)
			xi0 := truncUint8(x0 + 0.5)
			xi1 := truncUint8(x1 + 0.5)
			y[8+j] = xi0&0x0f | (xi1&0x0f)<<4
			qh |= uint32(xi0&0x10) >> 4 << j
			qh |= uint32(xi1&0x10) >> 4 << (j + qk/2)
		}
		binary.LittleEndian.PutUint32(y[4:], qh)
	}
}

// truncUint8 is C's (uint8_t) conversion of a float in uint8's range: towards zero (the
// low byte of Go's conversion outside it, where C's behaviour is undefined).
func truncUint8(v float32) uint8 {
	if !(v > -1 && v < 256) {
		return uint8(int64(v))
	}
	return uint8(v)
}

func dequantizeQ5_1(dst []float32, src []byte) {
	for i := 0; i < len(dst)/qk; i++ {
		b, y := src[i*24:(i+1)*24], dst[i*qk:(i+1)*qk]
		d, m := fp16(b), fp16(b[2:])
		qh := binary.LittleEndian.Uint32(b[4:])
		for j := 0; j < qk/2; j++ {
			xh0 := uint8(qh>>j<<4) & 0x10
			xh1 := uint8(qh>>(j+12)) & 0x10
			y[j] = float32(float32(b[8+j]&0x0f|xh0)*d) + m
			y[j+qk/2] = float32(float32(b[8+j]>>4|xh1)*d) + m
		}
	}
}

func quantizeQ8_0(dst []byte, x []float32) {
	for i := 0; i < len(x)/qk; i++ {
		xb, y := x[i*qk:(i+1)*qk], dst[i*34:(i+1)*34]
		var amax float32
		for _, v := range xb {
			if a := abs32(v); !(amax > a) { // C's MAX(amax, a)
				amax = a
			}
		}
		d := amax / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putFP16(y[0:], d)
		for j, v := range xb {
			y[2+j] = byte(roundInt8(float32(v * id)))
		}
	}
}

// roundInt8 is C's (int8_t)roundf(v): round half away from zero, then the conversion.
func roundInt8(v float32) int8 {
	r := math.Round(float64(v))
	if !(r > -129 && r < 128) {
		return int8(int64(r))
	}
	return int8(r)
}

func dequantizeQ8_0(dst []float32, src []byte) {
	for i := 0; i < len(dst)/qk; i++ {
		b, y := src[i*34:(i+1)*34], dst[i*qk:(i+1)*qk]
		d := fp16(b)
		for j := range y {
			y[j] = float32(int8(b[2+j])) * d
		}
	}
}
