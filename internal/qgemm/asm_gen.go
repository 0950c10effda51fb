//go:build ignore

// asm_gen writes kernel_amd64.s, the AVX-512 VNNI kernels of package qgemm (go generate).
// The kernels are unrolled over the tile's rows; writing them from one loop here keeps
// the register allocation in one place.
package main

import (
	"bytes"
	"fmt"
	"os"
)

// The layout constants of quantize.go and layout.go.
const (
	mr          = 6
	aQuants     = 8 * mr * 4
	aScale      = aQuants
	aCorr       = aScale + 4*mr
	aBlockBytes = aCorr + 4*mr
	q8Panel     = 64 + 8*32*4
	q4kSc       = 128
	q4kM        = 384
	q4kQ        = 640
	q4kPanel    = 640 + 8*4*32*4
)

var out bytes.Buffer

func p(format string, args ...any) { fmt.Fprintf(&out, "\t"+format+"\n", args...) }
func label(l string)               { fmt.Fprintf(&out, "%s:\n", l) }

// Registers of the 6x32 tile: I(r, h) the int32 sums of row r, columns 16h..16h+15 for the
// current block; F(r, h) the float32 results.
func I(r, h int) string { return fmt.Sprintf("Z%d", 2*r+h) }
func F(r, h int) string { return fmt.Sprintf("Z%d", 12+2*r+h) }

func storeF() {
	for r := range mr {
		p("VMOVUPS %s, (DX)", F(r, 0))
		p("VMOVUPS %s, 64(DX)", F(r, 1))
		if r < mr-1 {
			p("ADDQ R12, DX")
		}
	}
}

func header(name, sig, frame string) {
	fmt.Fprintf(&out, "\n// func %s\nTEXT ·%s(SB), NOSPLIT, %s\n", sig, name, frame)
}

func q8_0() {
	header("kernelQ8_0AVX512", "kernelQ8_0AVX512(nb int, a *byte, w *byte, c *float32, ldc int)", "$0-40")
	out.WriteString(`//
// c[r*ldc+j] = Σ over nb blocks of float(Σ_p u[p, j]·qa[r, p] − 128·Σ_p qa[r, p])·(da[r]·d[j])
// for r < 6, j < 32: a is a quantized activation tile (quantize.go), w a Q8_0 panel
// (layout.go). Z0-Z11 hold the block's int32 sums, Z12-Z23 the results, Z24-Z25 a quad of
// the panel, Z26-Z27 the block's weight scales.
`)
	p("MOVQ nb+0(FP), CX")
	p("MOVQ a+8(FP), SI")
	p("MOVQ w+16(FP), DI")
	p("MOVQ c+24(FP), DX")
	p("MOVQ ldc+32(FP), R12")
	p("SHLQ $2, R12")
	for r := range mr {
		p("VPXORD %s, %s, %s", F(r, 0), F(r, 0), F(r, 0))
		p("VPXORD %s, %s, %s", F(r, 1), F(r, 1), F(r, 1))
	}
	p("TESTQ CX, CX")
	p("JEQ q8store")
	label("q8loop")
	for r := range mr {
		p("VPBROADCASTD %d(SI), %s", aCorr+4*r, I(r, 0))
		p("VMOVDQA32 %s, %s", I(r, 0), I(r, 1))
	}
	for t := range 8 {
		p("VMOVDQU32 %d(DI), Z24", 64+t*128)
		p("VMOVDQU32 %d(DI), Z25", 64+t*128+64)
		for r := range mr {
			p("VPDPBUSD.BCST %d(SI), Z24, %s", t*mr*4+4*r, I(r, 0))
			p("VPDPBUSD.BCST %d(SI), Z25, %s", t*mr*4+4*r, I(r, 1))
		}
	}
	p("VCVTPH2PS 0(DI), Z26")
	p("VCVTPH2PS 32(DI), Z27")
	for r := range mr {
		for h := range 2 {
			p("VCVTDQ2PS %s, %s", I(r, h), I(r, h))
			p("VMULPS.BCST %d(SI), Z%d, Z28", aScale+4*r, 26+h)
			p("VFMADD231PS %s, Z28, %s", I(r, h), F(r, h))
		}
	}
	p("ADDQ $%d, SI", aBlockBytes)
	p("ADDQ $%d, DI", q8Panel)
	p("DECQ CX")
	p("JNE q8loop")
	label("q8store")
	storeF()
	p("VZEROUPPER")
	p("RET")
}

func q4_K() {
	header("kernelQ4_KAVX512", "kernelQ4_KAVX512(nb int, a *byte, w *byte, c *float32, ldc int)", "$0-40")
	out.WriteString(`//
// c[r*ldc+j] = Σ over nb/8 super-blocks and their 8 sub-blocks s of
// float(Σ_p u[p, j]·qa[r, p])·(da[r]·D[s, j]) − (da[r]·Σ_p qa[r, p])·M[s, j], with
// D = d·sc_s and M = dmin·m_s: a is a quantized activation tile (quantize.go), w a Q4_K
// panel (layout.go). Z0-Z11 hold the sub-block's int32 sums, Z12-Z23 the results; in the
// sub-block's loop Z24-Z27 hold quants (Z28 the nibble mask), after it D and M.
`)
	p("MOVQ nb+0(FP), BX")
	p("SHRQ $3, BX")
	p("MOVQ a+8(FP), SI")
	p("MOVQ w+16(FP), DI")
	p("MOVQ c+24(FP), DX")
	p("MOVQ ldc+32(FP), R12")
	p("SHLQ $2, R12")
	p("MOVL $0x0f0f0f0f, AX")
	p("VPBROADCASTD AX, Z28")
	for r := range mr {
		p("VPXORD %s, %s, %s", F(r, 0), F(r, 0), F(r, 0))
		p("VPXORD %s, %s, %s", F(r, 1), F(r, 1), F(r, 1))
	}
	p("TESTQ BX, BX")
	p("JEQ q4kstore")
	label("q4ksuper")
	p("LEAQ %d(DI), R8", q4kQ)
	p("LEAQ %d(DI), R9", q4kSc)
	p("LEAQ %d(DI), R10", q4kM)
	p("MOVQ $8, CX")
	label("q4ksub")
	for r := range mr {
		p("VPXORD %s, %s, %s", I(r, 0), I(r, 0), I(r, 0))
		p("VPXORD %s, %s, %s", I(r, 1), I(r, 1), I(r, 1))
	}
	for t := range 4 {
		p("VMOVDQU32 %d(R8), Z24", t*128)
		p("VMOVDQU32 %d(R8), Z25", t*128+64)
		p("VPANDD Z28, Z24, Z26")
		p("VPANDD Z28, Z25, Z27")
		for r := range mr {
			p("VPDPBUSD.BCST %d(SI), Z26, %s", 2*t*mr*4+4*r, I(r, 0))
			p("VPDPBUSD.BCST %d(SI), Z27, %s", 2*t*mr*4+4*r, I(r, 1))
		}
		p("VPSRLW $4, Z24, Z24")
		p("VPSRLW $4, Z25, Z25")
		p("VPANDD Z28, Z24, Z24")
		p("VPANDD Z28, Z25, Z25")
		for r := range mr {
			p("VPDPBUSD.BCST %d(SI), Z24, %s", (2*t+1)*mr*4+4*r, I(r, 0))
			p("VPDPBUSD.BCST %d(SI), Z25, %s", (2*t+1)*mr*4+4*r, I(r, 1))
		}
	}
	// D = d·sc and M = dmin·m for the 32 columns, as float32 products (exact).
	for i, src := range []struct{ half, bytes string }{{"0(DI)", "0(R9)"}, {"32(DI)", "16(R9)"}, {"64(DI)", "0(R10)"}, {"96(DI)", "16(R10)"}} {
		reg := fmt.Sprintf("Z%d", 24+i)
		p("VCVTPH2PS %s, %s", src.half, reg)
		p("VPMOVZXBD %s, Z29", src.bytes)
		p("VCVTDQ2PS Z29, Z29")
		p("VMULPS Z29, %s, %s", reg, reg)
	}
	for r := range mr {
		for h := range 2 {
			p("VCVTDQ2PS %s, %s", I(r, h), I(r, h))
			p("VMULPS.BCST %d(SI), Z%d, Z29", aScale+4*r, 24+h)
			p("VFMADD231PS %s, Z29, %s", I(r, h), F(r, h))
			p("VFNMADD231PS.BCST %d(SI), Z%d, %s", aCorr+4*r, 26+h, F(r, h))
		}
	}
	p("ADDQ $%d, SI", aBlockBytes)
	p("ADDQ $512, R8")
	p("ADDQ $32, R9")
	p("ADDQ $32, R10")
	p("DECQ CX")
	p("JNE q4ksub")
	p("ADDQ $%d, DI", q4kPanel)
	p("DECQ BX")
	p("JNE q4ksuper")
	label("q4kstore")
	storeF()
	p("VZEROUPPER")
	p("RET")
}

func quantize() {
	header("quantizeRowAVX512", "quantizeRowAVX512(nb int, x *float32, dst *byte, intCorr bool)", "$0-25")
	out.WriteString(`//
// Quantizes nb blocks of 32 values of one row (x) into a tile, dst pointing at the row's
// first quad of block 0 (tile + 4·row): per block d = amax/127, q = x·(1/d) rounded to
// nearest even (0 when d is 0), stored as quads at 24-byte strides, d at aScale and the
// correction (−128·Σq, or d·Σq as float32) at aCorr from dst; blocks aBlockBytes apart.
`)
	p("MOVQ nb+0(FP), CX")
	p("MOVQ x+8(FP), SI")
	p("MOVQ dst+16(FP), DI")
	p("MOVBQZX intCorr+24(FP), R8")
	p("VPTERNLOGD $0xff, Z31, Z31, Z31")
	p("VPSRLD $1, Z31, Z31") // 0x7fffffff: |x|
	p("MOVL $0x42fe0000, AX")
	p("VMOVD AX, X13") // 127
	p("MOVL $0x3f800000, AX")
	p("VMOVD AX, X14") // 1
	p("VXORPS X15, X15, X15")
	p("TESTQ CX, CX")
	p("JEQ qdone")
	label("qloop")
	p("VMOVUPS (SI), Z0")
	p("VMOVUPS 64(SI), Z1")
	p("VPANDD Z31, Z0, Z2")
	p("VPANDD Z31, Z1, Z3")
	p("VMAXPS Z3, Z2, Z2")
	p("VEXTRACTF32X8 $1, Z2, Y3")
	p("VMAXPS Y3, Y2, Y2")
	p("VEXTRACTF128 $1, Y2, X3")
	p("VMAXPS X3, X2, X2")
	p("VPERMILPS $0x4e, X2, X3")
	p("VMAXPS X3, X2, X2")
	p("VPERMILPS $0xb1, X2, X3")
	p("VMAXPS X3, X2, X2")      // every lane: amax
	p("VDIVSS X13, X2, X4")     // d = amax/127
	p("VDIVSS X4, X14, X5")     // 1/d
	p("VCMPSS $4, X15, X4, X6") // d != 0
	p("VANDPS X6, X5, X5")
	p("VBROADCASTSS X5, Z5")
	p("VMULPS Z5, Z0, Z0")
	p("VMULPS Z5, Z1, Z1")
	p("VCVTPS2DQ Z0, Z0")
	p("VCVTPS2DQ Z1, Z1")
	p("VPADDD Z1, Z0, Z6")
	p("VEXTRACTI32X8 $1, Z6, Y7")
	p("VPADDD Y7, Y6, Y6")
	p("VEXTRACTI128 $1, Y6, X7")
	p("VPADDD X7, X6, X6")
	p("VPSHUFD $0x4e, X6, X7")
	p("VPADDD X7, X6, X6")
	p("VPSHUFD $0xb1, X6, X7")
	p("VPADDD X7, X6, X6") // lane 0: Σq
	p("VPMOVSDB Z0, X8")
	p("VPMOVSDB Z1, X9")
	for t := range 8 {
		x := 8 + t/4
		p("VPEXTRD $%d, X%d, %d(DI)", t%4, x, t*mr*4)
	}
	p("VMOVSS X4, %d(DI)", aScale)
	p("TESTQ R8, R8")
	p("JEQ qfloat")
	p("VPXOR X7, X7, X7")
	p("VPSUBD X6, X7, X7")
	p("VPSLLD $7, X7, X7")
	p("VMOVD X7, %d(DI)", aCorr)
	p("JMP qnext")
	label("qfloat")
	p("VCVTDQ2PS X6, X6")
	p("VMULSS X6, X4, X6")
	p("VMOVSS X6, %d(DI)", aCorr)
	label("qnext")
	p("ADDQ $128, SI")
	p("ADDQ $%d, DI", aBlockBytes)
	p("DECQ CX")
	p("JNE qloop")
	label("qdone")
	p("VZEROUPPER")
	p("RET")
}

func main() {
	out.WriteString("// Code generated by asm_gen.go; DO NOT EDIT.\n\n#include \"textflag.h\"\n")
	q8_0()
	q4_K()
	quantize()
	if err := os.WriteFile("kernel_amd64.s", out.Bytes(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
