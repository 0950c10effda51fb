// Package gemm multiplies float32 matrices on the CPU: C = A·B with A row-major (any row
// stride) and B either given as rows of the contracting axis (MulNT: C = A·Bᵀ, the layout
// simplego normalises every DotGeneral to) or packed once into panels (PackRows,
// PackCols) that MulPacked and MulPanel consume, which is how vdpp's fused convolution and
// attention kernels feed it without copying their operands into matrices first. B may
// also be half precision (IEEE binary16 or bfloat16, PackHalfRows, MulHalf): the kernels
// widen each panel row as they load it, so a linear layer's f16 or bf16 weights are used
// as stored, never copied to float32, and the result is the bits of the float32 product of
// the widened values.
//
// The contract: the products write every element of C (they do not accumulate into it);
// each element is the sum over k in increasing order, so the result for a row does not
// depend on which other rows are computed with it or how the rows are split over
// goroutines (the output is bit-identical for any split). On amd64 the inner kernel is
// assembly: 8x32 tiles with AVX-512 where the CPU has it, 4x16 tiles with AVX2 and FMA
// otherwise; both do one fused multiply-add per product in the same order, so they give
// the same bits. Elsewhere it is plain Go (multiply, then add) and Accelerated reports
// false. VDPP_GEMM_ISA=avx2 or =go caps the kernel for comparisons.
package gemm
