// Package qgemm multiplies float32 activations by weights held in ggml's block-quantized
// types (Q8_0, Q4_K) without ever widening the weights to float32: C = A·Wᵀ for A [m, k]
// float32 and W [n, k] quantized, the product of a linear layer.
//
// How: the activations are quantized on the fly, each row in blocks of 32 (every rounding
// to nearest even), and every block's products are integer dot products, scaled and summed
// in float32. For Q4_K a block is ggml's q8_0 of it (d = amax/127, 8 bits; the error of
// these products against the float product of the dequantized weights is about 0.5% of a
// row's scale, small beside Q4_K's own). For Q8_0 a block has 16 bits (e = d/254, Q = x/e),
// split into two int8 digits Q = 254·hi + lo whose byte products the kernel combines
// exactly, so a Q8_0 product is the float product of the dequantized weights up to float32
// rounding (relative error about 1e-5): its error is the weights' alone.
//
// The weights are repacked once, at load, from ggml's row-major blocks into panels of 32
// weight rows (Pack): the same bytes per weight as stored (the same scales and quants,
// rearranged so that one vector load gives 16 output columns times 4 contracting
// positions), which the AVX-512 VNNI kernel (VPDPBUSD) reads directly. A block of weights
// w = D·u − M, with u the unsigned quant (Q8_0: the int8 plus 128; Q4_K: the 4-bit quant), D
// and M the block's scale and offset as ggml dequantizes them (Q8_0: d and 128·d; Q4_K: d·sc
// and dmin·m), contributes
//
//	da·D·Σ u·qa − da·M·Σ qa
//
// to an output, qa the quantized activations of the block and da their scale (Q8_0's
// correction is folded into the integer sums).
//
// The contract: every element of C is written (nothing accumulates into it) and is one
// row's sum over the blocks in increasing order, so a row's result does not depend on the
// rows computed with it, on how rows are split over goroutines or on how the contraction is
// cut into passes: the output is the same bits for any split. The integer sums are exact;
// the kernels (AVX-512 VNNI assembly where the CPU has it, portable Go elsewhere,
// VDPP_QGEMM_ISA=go to compare) may round the float steps differently from each other (the
// assembly fuses the multiply-add).
package qgemm
