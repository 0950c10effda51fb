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
	mr       = 6
	aQuants  = 8 * mr * 4
	nScale   = aQuants
	nCorr    = nScale + 4*mr
	nBlock   = nCorr + 4*mr
	wLo      = aQuants
	wScale   = wLo + aQuants
	wCorr1   = wScale + 4*mr
	wCorr2   = wCorr1 + 4*mr
	wBlock   = wCorr2 + 4*mr
	q8Panel  = 64 + 8*32*4
	q4kSc    = 128
	q4kM     = 384
	q4kQ     = 640
	q4kPanel = 640 + 8*4*32*4
)

var out bytes.Buffer

func p(format string, args ...any) { fmt.Fprintf(&out, "\t"+format+"\n", args...) }
func label(l string)               { fmt.Fprintf(&out, "%s:\n", l) }

// Registers of the 6x32 tile: I(r, h) the int32 sums of row r, columns 16h..16h+15 for the
// current block; F(r, h) the float32 results.
func I(r, h int) string { return fmt.Sprintf("Z%d", 2*r+h) }
func F(r, h int) string { return fmt.Sprintf("Z%d", 12+2*r+h) }

// initF zeroes the results, or with acc (a bool argument at accOff) loads them from C.
func initF(name string, accOff int) {
	for r := range mr {
		p("VPXORD %s, %s, %s", F(r, 0), F(r, 0), F(r, 0))
		p("VPXORD %s, %s, %s", F(r, 1), F(r, 1), F(r, 1))
	}
	p("MOVBQZX acc+%d(FP), AX", accOff)
	p("TESTQ AX, AX")
	p("JEQ %szeroed", name)
	p("MOVQ DX, R13")
	for r := range mr {
		p("VMOVUPS (R13), %s", F(r, 0))
		p("VMOVUPS 64(R13), %s", F(r, 1))
		if r < mr-1 {
			p("ADDQ R12, R13")
		}
	}
	label(name + "zeroed")
}

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
	header("kernelQ8_0AVX512", "kernelQ8_0AVX512(nb int, a *byte, w *byte, c *float32, ldc int, acc bool)", "$0-41")
	out.WriteString(`//
// c[r*ldc+j] (+)= Σ over nb blocks of float(Σ_p w[p, j]·Q[r, p])·(e[r]·d[j]) for r < 6,
// j < 32 (with acc continuing from c's values): a is a wide activation tile (quantize.go: Q = 254·hi + lo), w a Q8_0 panel
// (layout.go, the quants stored as w+128). Per block the int32 sums start at −128·Σhi,
// take the hi bytes, are multiplied by 254, take −128·Σlo and the lo bytes: Σ w·Q exactly.
// Z0-Z11 hold the block's int32 sums, Z12-Z23 the results, Z24-Z25 a quad of the panel,
// Z26-Z27 the block's weight scales, Z29 254.
`)
	p("MOVQ nb+0(FP), CX")
	p("MOVQ a+8(FP), SI")
	p("MOVQ w+16(FP), DI")
	p("MOVQ c+24(FP), DX")
	p("MOVQ ldc+32(FP), R12")
	p("SHLQ $2, R12")
	p("MOVL $254, AX")
	p("VPBROADCASTD AX, Z29")
	initF("q8", 40)
	p("TESTQ CX, CX")
	p("JEQ q8store")
	label("q8loop")
	for r := range mr {
		p("VPBROADCASTD %d(SI), %s", wCorr1+4*r, I(r, 0))
		p("VMOVDQA32 %s, %s", I(r, 0), I(r, 1))
	}
	for pass, base := range []int{0, wLo} {
		if pass == 1 {
			for r := range mr {
				for h := range 2 {
					p("VPMULLD Z29, %s, %s", I(r, h), I(r, h))
					p("VPADDD.BCST %d(SI), %s, %s", wCorr2+4*r, I(r, h), I(r, h))
				}
			}
		}
		for t := range 8 {
			p("VMOVDQU32 %d(DI), Z24", 64+t*128)
			p("VMOVDQU32 %d(DI), Z25", 64+t*128+64)
			for r := range mr {
				p("VPDPBUSD.BCST %d(SI), Z24, %s", base+t*mr*4+4*r, I(r, 0))
				p("VPDPBUSD.BCST %d(SI), Z25, %s", base+t*mr*4+4*r, I(r, 1))
			}
		}
	}
	p("VCVTPH2PS 0(DI), Z26")
	p("VCVTPH2PS 32(DI), Z27")
	for r := range mr {
		for h := range 2 {
			p("VCVTDQ2PS %s, %s", I(r, h), I(r, h))
			p("VMULPS.BCST %d(SI), Z%d, Z28", wScale+4*r, 26+h)
			p("VFMADD231PS %s, Z28, %s", I(r, h), F(r, h))
		}
	}
	p("ADDQ $%d, SI", wBlock)
	p("ADDQ $%d, DI", q8Panel)
	p("DECQ CX")
	p("JNE q8loop")
	label("q8store")
	storeF()
	p("VZEROUPPER")
	p("RET")
}

func q4_K() {
	header("kernelQ4_KAVX512", "kernelQ4_KAVX512(nb int, a *byte, w *byte, c *float32, ldc int, acc bool)", "$0-41")
	out.WriteString(`//
// c[r*ldc+j] (+)= Σ over nb/8 super-blocks and their 8 sub-blocks s of
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
	initF("q4k", 40)
	p("MOVL $0x0f0f0f0f, AX")
	p("VPBROADCASTD AX, Z28")
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
			p("VMULPS.BCST %d(SI), Z%d, Z29", nScale+4*r, 24+h)
			p("VFMADD231PS %s, Z29, %s", I(r, h), F(r, h))
			p("VFNMADD231PS.BCST %d(SI), Z%d, %s", nCorr+4*r, 26+h, F(r, h))
		}
	}
	p("ADDQ $%d, SI", nBlock)
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

// quantPrologue loads the constants of the quantizers: Z31 |x|'s mask, X13 127, X14 1, X15 0.
func quantPrologue() {
	p("VPTERNLOGD $0xff, Z31, Z31, Z31")
	p("VPSRLD $1, Z31, Z31") // 0x7fffffff: |x|
	p("MOVL $0x42fe0000, AX")
	p("VMOVD AX, X13") // 127
	p("MOVL $0x3f800000, AX")
	p("VMOVD AX, X14") // 1
	p("VXORPS X15, X15, X15")
}

// absMax loads the block at SI into Z0, Z1 and leaves its amax in every lane of X2.
func absMax() {
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
	p("VMAXPS X3, X2, X2")
}

// scaleBy multiplies Z0, Z1 by 1/X4 (0 when X4 is 0) and rounds them to int32.
func scaleBy() {
	p("VDIVSS X4, X14, X5")     // 1/scale
	p("VCMPSS $4, X15, X4, X6") // scale != 0
	p("VANDPS X6, X5, X5")
	p("VBROADCASTSS X5, Z5")
	p("VMULPS Z5, Z0, Z0")
	p("VMULPS Z5, Z1, Z1")
	p("VCVTPS2DQ Z0, Z0")
	p("VCVTPS2DQ Z1, Z1")
}

// sumTo adds the int32 lanes of Z(a) and Z(b) into lane 0 of X(dst) (tmp a scratch register).
func sumTo(a, b, dst, tmp int) {
	p("VPADDD Z%d, Z%d, Z%d", b, a, dst)
	p("VEXTRACTI32X8 $1, Z%d, Y%d", dst, tmp)
	p("VPADDD Y%d, Y%d, Y%d", tmp, dst, dst)
	p("VEXTRACTI128 $1, Y%d, X%d", dst, tmp)
	p("VPADDD X%d, X%d, X%d", tmp, dst, dst)
	p("VPSHUFD $0x4e, X%d, X%d", dst, tmp)
	p("VPADDD X%d, X%d, X%d", tmp, dst, dst)
	p("VPSHUFD $0xb1, X%d, X%d", dst, tmp)
	p("VPADDD X%d, X%d, X%d", tmp, dst, dst)
}

// storeQuads stores the 8 quads of the int8 values in X(lo16), X(hi16) at off + 24·t(DI).
func storeQuads(x0, x1, off int) {
	for t := range 8 {
		x := x0
		if t >= 4 {
			x = x1
		}
		p("VPEXTRD $%d, X%d, %d(DI)", t%4, x, off+t*mr*4)
	}
}

// negShift7 stores −128 times lane 0 of X(src) at off(DI) (X1 scratch).
func negShift7(src, off int) {
	p("VPXOR X1, X1, X1")
	p("VPSUBD X%d, X1, X1", src)
	p("VPSLLD $7, X1, X1")
	p("VMOVD X1, %d(DI)", off)
}

func quantize() {
	header("quantizeRowNarrowAVX512", "quantizeRowNarrowAVX512(nb int, x *float32, dst *byte)", "$0-24")
	out.WriteString(`//
// Quantizes nb blocks of 32 values of one row (x) into a narrow tile, dst pointing at the
// row's first quad of block 0 (tile + 4·row): per block d = amax/127, q = x·(1/d) rounded to
// nearest even (0 when d is 0), stored as quads at 24-byte strides, d at nScale and d·Σq
// (float32) at nCorr from dst; blocks nBlock apart.
`)
	p("MOVQ nb+0(FP), CX")
	p("MOVQ x+8(FP), SI")
	p("MOVQ dst+16(FP), DI")
	quantPrologue()
	p("TESTQ CX, CX")
	p("JEQ qndone")
	label("qnloop")
	absMax()
	p("VDIVSS X13, X2, X4") // d = amax/127
	scaleBy()
	sumTo(0, 1, 6, 7) // Σq
	p("VPMOVSDB Z0, X8")
	p("VPMOVSDB Z1, X9")
	storeQuads(8, 9, 0)
	p("VMOVSS X4, %d(DI)", nScale)
	p("VCVTDQ2PS X6, X6")
	p("VMULSS X6, X4, X6")
	p("VMOVSS X6, %d(DI)", nCorr)
	p("ADDQ $128, SI")
	p("ADDQ $%d, DI", nBlock)
	p("DECQ CX")
	p("JNE qnloop")
	label("qndone")
	p("VZEROUPPER")
	p("RET")

	header("quantizeRowWideAVX512", "quantizeRowWideAVX512(nb int, x *float32, dst *byte)", "$0-24")
	out.WriteString(`//
// Quantizes nb blocks of 32 values of one row (x) into a wide tile, dst pointing at the
// row's first quad of block 0: per block e = (amax/127)/254, Q = x·(1/e) rounded to nearest
// even (0 when e is 0), hi = ⌊(Q+127)/254⌋ (a float division, exact for these integers, and
// a floor), lo = Q − 254·hi; the hi quads at 0, the lo quads at wLo, e at wScale, −128·Σhi at
// wCorr1 and −128·Σlo at wCorr2 from dst; blocks wBlock apart.
`)
	p("MOVQ nb+0(FP), CX")
	p("MOVQ x+8(FP), SI")
	p("MOVQ dst+16(FP), DI")
	quantPrologue()
	p("MOVL $0x437e0000, AX")
	p("VMOVD AX, X12")         // 254
	p("VBROADCASTSS X12, Z30") // 254.0 in every lane
	p("MOVL $254, AX")
	p("VPBROADCASTD AX, Z29")
	p("MOVL $127, AX")
	p("VPBROADCASTD AX, Z28")
	p("TESTQ CX, CX")
	p("JEQ qwdone")
	label("qwloop")
	absMax()
	p("VDIVSS X13, X2, X4") // d = amax/127
	p("VDIVSS X12, X4, X4") // e = d/254
	scaleBy()               // Z0, Z1: Q
	for i, q := range []int{0, 1} {
		h, l := 6+i, 8+i
		p("VPADDD Z28, Z%d, Z%d", q, h)
		p("VCVTDQ2PS Z%d, Z%d", h, h)
		p("VDIVPS Z30, Z%d, Z%d", h, h)
		p("VRNDSCALEPS $9, Z%d, Z%d", h, h) // floor
		p("VCVTPS2DQ Z%d, Z%d", h, h)       // hi
		p("VPMULLD Z29, Z%d, Z%d", h, l)
		p("VPSUBD Z%d, Z%d, Z%d", l, q, l) // lo = Q − 254·hi
	}
	sumTo(6, 7, 2, 10) // Σhi
	sumTo(8, 9, 3, 11) // Σlo
	p("VPMOVSDB Z6, X10")
	p("VPMOVSDB Z7, X11")
	p("VPMOVSDB Z8, X6")
	p("VPMOVSDB Z9, X7")
	storeQuads(10, 11, 0)
	storeQuads(6, 7, wLo)
	p("VMOVSS X4, %d(DI)", wScale)
	negShift7(2, wCorr1)
	negShift7(3, wCorr2)
	p("ADDQ $128, SI")
	p("ADDQ $%d, DI", wBlock)
	p("DECQ CX")
	p("JNE qwloop")
	label("qwdone")
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
