//go:build !amd64

package gemm

// accelerated is false: only amd64 has an assembly kernel.
var accelerated = false

func kernel4x16(k int, a []float32, lda int, b []float32, c []float32, ldc int) {
	kernel4x16Go(k, a, lda, b, c, ldc)
}
