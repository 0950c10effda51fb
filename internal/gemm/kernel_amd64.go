package gemm

import "golang.org/x/sys/cpu"

// accelerated is whether the AVX2/FMA kernel can run on this CPU.
var accelerated = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// kernel4x16AVX2 sets c[r*ldc+j] = Σ_{p<k} a[r*lda+p]·b[p*16+j] for r < 4, j < 16, where b
// is a packed panel of 16 columns. Strides are in elements.
//
//go:noescape
func kernel4x16AVX2(k int, a *float32, lda int, b *float32, c *float32, ldc int)

func kernel4x16(k int, a []float32, lda int, b []float32, c []float32, ldc int) {
	if accelerated {
		// Bounds the assembly relies on, checked once per tile.
		_ = a[3*lda+k-1]
		_ = b[16*k-1]
		_ = c[3*ldc+15]
		kernel4x16AVX2(k, &a[0], lda, &b[0], &c[0], ldc)
		return
	}
	kernel4x16Go(k, a, lda, b, c, ldc)
}
