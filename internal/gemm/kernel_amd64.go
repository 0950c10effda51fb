package gemm

import (
	"os"

	"golang.org/x/sys/cpu"
)

// kernel4x16AVX2 sets c[r*ldc+j] = Σ_{p<k} a[r*lda+p]·b[p*16+j] for r < 4, j < 16, where b
// is a packed panel of 16 columns. Strides are in elements.
//
//go:noescape
func kernel4x16AVX2(k int, a *float32, lda int, b *float32, c *float32, ldc int)

// kernel8x32AVX512 is kernel4x16AVX2 for r < 8, j < 32 (panels of 32 columns).
//
//go:noescape
func kernel8x32AVX512(k int, a *float32, lda int, b *float32, c *float32, ldc int)

func kernel4x16(k int, a []float32, lda int, b []float32, c []float32, ldc int) {
	// Bounds the assembly relies on, checked once per tile.
	_ = a[3*lda+k-1]
	_ = b[16*k-1]
	_ = c[3*ldc+15]
	kernel4x16AVX2(k, &a[0], lda, &b[0], &c[0], ldc)
}

func kernel8x32(k int, a []float32, lda int, b []float32, c []float32, ldc int) {
	_ = a[7*lda+k-1]
	_ = b[32*k-1]
	_ = c[7*ldc+31]
	kernel8x32AVX512(k, &a[0], lda, &b[0], &c[0], ldc)
}

var (
	avx2ISA   = isa{name: "avx2", mr: 4, nr: 16, kernel: kernel4x16}
	avx512ISA = isa{name: "avx512", mr: 8, nr: 32, kernel: kernel8x32}
)

// ISAEnv names the environment variable that caps the kernel ("avx2" or "go"), for
// comparisons; the default is the best the CPU runs.
const ISAEnv = "VDPP_GEMM_ISA"

// bestISA picks the widest kernel the CPU (and the OS, which must save the registers)
// supports, capped by $VDPP_GEMM_ISA.
func bestISA() isa {
	want := os.Getenv(ISAEnv)
	hasAVX2 := cpu.X86.HasAVX2 && cpu.X86.HasFMA
	switch {
	case want == "go" || !hasAVX2:
		return goISA
	case want != "avx2" && cpu.X86.HasAVX512F:
		return avx512ISA
	default:
		return avx2ISA
	}
}
