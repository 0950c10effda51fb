package gemm

import (
	"os"

	"golang.org/x/sys/cpu"
)

// The assembly kernels: c[r*ldc+j] (+)= Σ_{p<k} a[p*mr+r]·b[p*nr+j] for r < mr, j < nr
// (AVX2: 4x16, AVX-512: 8x32), with A's mr rows packed as [k][mr] (PackA) and the panel
// [k][nr] (or its rows through a table of pointers, the Ptr forms); with acc the sums continue from c's values, so a product
// cut along k gives the bits of the uncut one. Strides are in elements.

//go:noescape
func kernel4x16AVX2(k int, a *float32, b *float32, c *float32, ldc int, acc bool)

//go:noescape
func kernel4x16AVX2Ptr(k int, a *float32, rows **float32, c *float32, ldc int, acc bool)

//go:noescape
func kernel8x32AVX512(k int, a *float32, b *float32, c *float32, ldc int, acc bool)

//go:noescape
func kernel8x32AVX512Ptr(k int, a *float32, rows **float32, c *float32, ldc int, acc bool)

func kernel8x32(k int, a, b, c []float32, ldc int, acc bool) {
	_ = a[8*k-1]
	_ = b[32*k-1]
	_ = c[7*ldc+31]
	kernel8x32AVX512(k, &a[0], &b[0], &c[0], ldc, acc)
}

func kernel8x32Ptr(k int, a []float32, rows []*float32, c []float32, ldc int, acc bool) {
	_ = a[8*k-1]
	_ = rows[k-1]
	_ = c[7*ldc+31]
	kernel8x32AVX512Ptr(k, &a[0], &rows[0], &c[0], ldc, acc)
}

//go:noescape
func pack8AVX2(dst, src *float32, lda, k int)

// pack8 packs 8 whole rows of A into [k][8] with the AVX2 transpose for k's multiple of 8
// and plain Go for the rest.
func pack8(dst []float32, k int, a []float32, lda int) {
	k8 := k &^ 7
	if k8 > 0 {
		_ = a[7*lda+k8-1]
		_ = dst[8*k8-1]
		pack8AVX2(&dst[0], &a[0], lda, k8)
	}
	for r := range 8 {
		for p := k8; p < k; p++ {
			dst[p*8+r] = a[r*lda+p]
		}
	}
}

func kernel4x16(k int, a, b, c []float32, ldc int, acc bool) {
	// Bounds the assembly relies on, checked once per tile.
	_ = a[4*k-1]
	_ = b[16*k-1]
	_ = c[3*ldc+15]
	kernel4x16AVX2(k, &a[0], &b[0], &c[0], ldc, acc)
}

func kernel4x16Ptr(k int, a []float32, rows []*float32, c []float32, ldc int, acc bool) {
	_ = a[4*k-1]
	_ = rows[k-1]
	_ = c[3*ldc+15]
	kernel4x16AVX2Ptr(k, &a[0], &rows[0], &c[0], ldc, acc)
}

//go:noescape
func kernel8x32F16AVX512(k int, a *float32, b *uint16, c *float32, ldc int, acc bool)

//go:noescape
func kernel8x32BF16AVX512(k int, a *float32, b *uint16, c *float32, ldc int, acc bool)

//go:noescape
func kernel4x16F16AVX2(k int, a *float32, b *uint16, c *float32, ldc int, acc bool)

//go:noescape
func kernel4x16BF16AVX2(k int, a *float32, b *uint16, c *float32, ldc int, acc bool)

// halfKernel wraps a half-panel kernel of mr x nr with the bounds the assembly relies on.
func halfKernel(mr, nr int, f func(int, *float32, *uint16, *float32, int, bool)) func(int, []float32, []uint16, []float32, int, bool) {
	return func(k int, a []float32, b []uint16, c []float32, ldc int, acc bool) {
		_ = a[mr*k-1]
		_ = b[HalfPanelWidth*(k-1)+nr-1]
		_ = c[(mr-1)*ldc+nr-1]
		f(k, &a[0], &b[0], &c[0], ldc, acc)
	}
}

var (
	avx2ISA = isa{name: "avx2", mr: 4, nr: 16, kernel: kernel4x16, kernelPtr: kernel4x16Ptr,
		half: [2]func(int, []float32, []uint16, []float32, int, bool){
			halfKernel(4, 16, kernel4x16F16AVX2), halfKernel(4, 16, kernel4x16BF16AVX2)}}
	avx512ISA = isa{name: "avx512", mr: 8, nr: 32, kernel: kernel8x32, kernelPtr: kernel8x32Ptr, pack: pack8,
		half: [2]func(int, []float32, []uint16, []float32, int, bool){
			halfKernel(8, 32, kernel8x32F16AVX512), halfKernel(8, 32, kernel8x32BF16AVX512)}}
)

// ISAEnv names the environment variable that caps the kernel ("avx2" or "go"), for
// comparisons; the default is the best the CPU runs.
const ISAEnv = "VDPP_GEMM_ISA"

// bestISA picks the widest kernel the CPU (and the OS, which must save the registers)
// supports, capped by $VDPP_GEMM_ISA.
func bestISA() isa {
	want := os.Getenv(ISAEnv)
	// Every CPU with AVX2 and FMA also has F16C (VCVTPH2PS: Intel from Ivy Bridge, AMD from
	// Piledriver), which the half kernels use; golang.org/x/sys/cpu does not report it.
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
