package quant

import (
	"encoding/binary"
	"fmt"
	"math"
)

type rowFuncs struct {
	quantize   func(dst []byte, x []float32)
	dequantize func(dst []float32, src []byte)
}

// funcs holds each type's row conversions; every type of the table has both.
var funcs = map[Type]rowFuncs{
	F32:  {quantizeF32, dequantizeF32},
	F16:  {quantizeF16, dequantizeF16},
	BF16: {quantizeBF16, dequantizeBF16},
	Q4_0: {quantizeQ4_0, dequantizeQ4_0},
	Q4_1: {quantizeQ4_1, dequantizeQ4_1},
	Q5_0: {quantizeQ5_0, dequantizeQ5_0},
	Q5_1: {quantizeQ5_1, dequantizeQ5_1},
	Q8_0: {quantizeQ8_0, dequantizeQ8_0},
	Q2_K: {quantizeQ2_K, dequantizeQ2_K},
	Q3_K: {quantizeQ3_K, dequantizeQ3_K},
	Q4_K: {quantizeQ4_K, dequantizeQ4_K},
	Q5_K: {quantizeQ5_K, dequantizeQ5_K},
	Q6_K: {quantizeQ6_K, dequantizeQ6_K},
}

// Quantize returns src in type t: RowBytes(len(src)) bytes, the blocks one after the other,
// bit for bit what ggml's quantize_row_<t>_ref writes (f32, f16 and bf16 as ggml converts
// them: little-endian, round to nearest even). len(src) must be a whole number of blocks.
func Quantize(t Type, src []float32) ([]byte, error) {
	n, err := t.RowBytes(len(src))
	if err != nil {
		return nil, err
	}
	dst := make([]byte, n)
	funcs[t].quantize(dst, src)
	return dst, nil
}

// QuantizeTo writes src in type t into dst, which must hold exactly RowBytes(len(src))
// bytes; it is Quantize without the allocation, for converting a tensor a row at a time.
func QuantizeTo(t Type, dst []byte, src []float32) error {
	n, err := t.RowBytes(len(src))
	if err != nil {
		return err
	}
	if len(dst) != n {
		return fmt.Errorf("quant: %d %s weights take %d bytes, not %d", len(src), t, n, len(dst))
	}
	funcs[t].quantize(dst, src)
	return nil
}

// Dequantize writes the weights of src, in type t, into dst as float32, bit for bit what
// ggml's dequantize_row_<t> gives. len(src) must be RowBytes(len(dst)); any bytes are
// accepted (a NaN or an infinity in a scale gives NaNs or infinities, never a panic).
func Dequantize(t Type, src []byte, dst []float32) error {
	n, err := t.RowBytes(len(dst))
	if err != nil {
		return err
	}
	if len(src) != n {
		return fmt.Errorf("quant: %d %s weights take %d bytes, not %d", len(dst), t, n, len(src))
	}
	funcs[t].dequantize(dst, src)
	return nil
}

func quantizeF32(dst []byte, x []float32) {
	for i, v := range x {
		binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
	}
}

func dequantizeF32(dst []float32, src []byte) {
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
	}
}

func quantizeF16(dst []byte, x []float32) {
	for i, v := range x {
		binary.LittleEndian.PutUint16(dst[2*i:], Float32ToHalf(v))
	}
}

func dequantizeF16(dst []float32, src []byte) {
	for i := range dst {
		dst[i] = halfTable[binary.LittleEndian.Uint16(src[2*i:])]
	}
}

func quantizeBF16(dst []byte, x []float32) {
	for i, v := range x {
		binary.LittleEndian.PutUint16(dst[2*i:], Float32ToBFloat16(v))
	}
}

func dequantizeBF16(dst []float32, src []byte) {
	for i := range dst {
		dst[i] = BFloat16ToFloat32(binary.LittleEndian.Uint16(src[2*i:]))
	}
}
