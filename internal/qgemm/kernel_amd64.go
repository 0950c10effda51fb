package qgemm

import (
	"os"

	"golang.org/x/sys/cpu"
)

//go:generate go run asm_gen.go

//go:noescape
func kernelQ8_0AVX512(nb int, a *byte, w *byte, c *float32, ldc int, acc bool)

//go:noescape
func kernelQ4_KAVX512(nb int, a *byte, w *byte, c *float32, ldc int, acc bool)

//go:noescape
func quantizeRowNarrowAVX512(nb int, x *float32, dst *byte)

//go:noescape
func quantizeRowWideAVX512(nb int, x *float32, dst *byte)

// The bounds the assembly relies on, checked once per call.

func kernelQ8_0(nb int, a, w []byte, c []float32, ldc int, acc bool) {
	_ = a[nb*wBlock-1]
	_ = w[nb*layouts[Q8_0].panelBytes-1]
	_ = c[(mr-1)*ldc+PanelCols-1]
	kernelQ8_0AVX512(nb, &a[0], &w[0], &c[0], ldc, acc)
}

func kernelQ4_K(nb int, a, w []byte, c []float32, ldc int, acc bool) {
	_ = a[nb*nBlock-1]
	_ = w[nb/8*layouts[Q4_K].panelBytes-1]
	_ = c[(mr-1)*ldc+PanelCols-1]
	kernelQ4_KAVX512(nb, &a[0], &w[0], &c[0], ldc, acc)
}

func quantizeAVX512(dst []byte, rows, k int, a []float32, lda int, wide bool) {
	nb, bb := k/32, blockBytes(wide)
	_ = dst[nb*bb-1]
	if rows < mr {
		clear(dst[:nb*bb])
	}
	for r := range rows {
		_ = a[r*lda+k-1]
		if wide {
			quantizeRowWideAVX512(nb, &a[r*lda], &dst[4*r])
		} else {
			quantizeRowNarrowAVX512(nb, &a[r*lda], &dst[4*r])
		}
	}
}

var vnniISA = isa{name: "avx512vnni", q8_0: kernelQ8_0, q4_K: kernelQ4_K, quantize: quantizeAVX512}

// ISAEnv names the environment variable that caps the kernel ("go"), for comparisons; the
// default is the best the CPU runs.
const ISAEnv = "VDPP_QGEMM_ISA"

// bestISA picks the AVX-512 VNNI kernels where the CPU (and the OS) has them.
func bestISA() isa {
	x := cpu.X86
	if os.Getenv(ISAEnv) != "go" && x.HasAVX512F && x.HasAVX512BW && x.HasAVX512DQ && x.HasAVX512VL && x.HasAVX512VNNI {
		return vnniISA
	}
	return goISA
}
