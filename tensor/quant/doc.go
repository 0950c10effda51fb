// Package quant declares every weight type vdpp holds, once: the float types (f32, f16,
// bf16) and ggml's block types (q8_0, q4_0, q4_1, q5_0, q5_1 and the k-quants q2_K to q6_K),
// with ggml's type ids, block sizes, block bytes and names (as GGUF files, ggml and
// stable-diffusion.cpp spell them, and as --weights-dtype takes them), and converts rows of
// float32 weights to and from each type.
//
// Contract:
//   - Quantize and Dequantize are bit-exact with ggml's reference code: Quantize gives the
//     bytes of ggml_quantize_chunk without an importance matrix (quantize_row_<t>_ref, what
//     stable-diffusion.cpp's convert and its --type write), Dequantize the floats of
//     dequantize_row_<t>; f16 and bf16 convert as ggml does (round to nearest, ties to even).
//     The reference is ggml built with every float operation rounded on its own (its
//     baseline x86-64 build, no FMA); the golden files in testdata/ggml are made by
//     scripts/ggmlquant/golden.sh from a ggml checkout and compared bit for bit.
//   - A row is a whole number of blocks (Type.Fits, Type.RowBytes); anything else is an error,
//     never a panic, and Dequantize accepts any bytes (fuzzed).
//   - The package is pure: no I/O, no dependencies beyond the standard library.
//
// Block layouts (little-endian; "half" is an IEEE binary16 scale; a block of n weights
// y[0..n) is stored as below, bytes in order):
//
//	f32   4 bytes a weight                        f16, bf16   2 bytes a weight
//	q8_0  32 weights, 34 bytes: d half, qs[32] int8;            y[j] = d*qs[j]
//	q4_0  32 weights, 18 bytes: d half, qs[16];                 y[j] = d*((qs[j]&15)-8),
//	      y[j+16] = d*((qs[j]>>4)-8)
//	q4_1  32 weights, 20 bytes: d half, m half, qs[16];         y[j] = d*(qs[j]&15)+m, y[j+16] = d*(qs[j]>>4)+m
//	q5_0  32 weights, 22 bytes: d half, qh uint32, qs[16];      as q4_0 with bit j of qh (bit j+16
//	      for y[j+16]) as the fifth bit, minus 16 instead of 8
//	q5_1  32 weights, 24 bytes: d half, m half, qh uint32, qs[16]; as q4_1 with the fifth bit
//	q2_K  256 weights, 84 bytes: scales[16] (low nibble scale, high nibble min of each 16
//	      weights), qs[64] (2 bits), d half, dmin half;          y = d*sc*q - dmin*m
//	q3_K  256 weights, 110 bytes: hmask[32] (third bit), qs[64] (low 2 bits), scales[12]
//	      (16 signed 6-bit scales), d half;                      y = d*(sc-32)*(q-4 unless the hmask bit)
//	q4_K  256 weights, 144 bytes: d half, dmin half, scales[12] (8 6-bit scales and 8 6-bit
//	      mins, one pair per 32 weights), qs[128] (4 bits: the low nibbles of 32 bytes hold
//	      weights 0..31 of a 64, the high nibbles 32..63);    y = d*sc*q - dmin*m
//	q5_K  256 weights, 176 bytes: d half, dmin half, scales[12], qh[32] (fifth bits), qs[128]
//	q6_K  256 weights, 210 bytes: ql[128] (low 4 bits), qh[64] (high 2 bits), scales[16]
//	      int8 (one per 16 weights), d half;                    y = d*sc*(q-32)
//
// The k-quants' 6-bit scales and mins are packed as ggml's get_scale_min_k4 reads them:
// for j < 4, scale j is scales[j]&63 and min j is scales[j+4]&63; for j >= 4 the low four
// bits are in scales[j+4] (scale low nibble, min high nibble) and the top two bits in the top
// bits of scales[j-4] (scale) and scales[j] (min).
package quant
