// Package gemm multiplies float32 matrices on the CPU: C = A·Bᵀ with A [m, k] and B [n, k]
// both row-major (the contracting axis last, the layout simplego normalises every
// DotGeneral to). It exists because GoMLX v0.26's pure-Go backend multiplies with a scalar
// loop of about 1 GFLOP/s, which made that product most of a built-in video's time.
//
// The contract: MulNT writes every element of C (it does not accumulate into it); each
// element is the sum over k in increasing order, so the result for a row does not depend
// on which other rows are computed with it or how the rows are split over goroutines (the
// output is bit-identical for any split). On amd64 with AVX2 and FMA the inner kernel is
// assembly (fused multiply-add, 4×16 tiles); elsewhere it is plain Go with the same
// tiling, and Accelerated reports false.
package gemm
