#include "textflag.h"

// Vector forms of Exp, Sigmoid and SiLU (exp.go) on 8 float32 lanes with AVX2: the same
// float32 operations in the same order (no fused multiply-add), so every lane gives the
// bits of the Go function. Constants are 8-lane vectors.

DATA expc<>+0(SB)/4, $0x3fb8aa3b
DATA expc<>+4(SB)/4, $0x3fb8aa3b
DATA expc<>+8(SB)/4, $0x3fb8aa3b
DATA expc<>+12(SB)/4, $0x3fb8aa3b
DATA expc<>+16(SB)/4, $0x3fb8aa3b
DATA expc<>+20(SB)/4, $0x3fb8aa3b
DATA expc<>+24(SB)/4, $0x3fb8aa3b
DATA expc<>+28(SB)/4, $0x3fb8aa3b
DATA expc<>+32(SB)/4, $0x3f318000
DATA expc<>+36(SB)/4, $0x3f318000
DATA expc<>+40(SB)/4, $0x3f318000
DATA expc<>+44(SB)/4, $0x3f318000
DATA expc<>+48(SB)/4, $0x3f318000
DATA expc<>+52(SB)/4, $0x3f318000
DATA expc<>+56(SB)/4, $0x3f318000
DATA expc<>+60(SB)/4, $0x3f318000
DATA expc<>+64(SB)/4, $0xb95e8083
DATA expc<>+68(SB)/4, $0xb95e8083
DATA expc<>+72(SB)/4, $0xb95e8083
DATA expc<>+76(SB)/4, $0xb95e8083
DATA expc<>+80(SB)/4, $0xb95e8083
DATA expc<>+84(SB)/4, $0xb95e8083
DATA expc<>+88(SB)/4, $0xb95e8083
DATA expc<>+92(SB)/4, $0xb95e8083
DATA expc<>+96(SB)/4, $0x39506967
DATA expc<>+100(SB)/4, $0x39506967
DATA expc<>+104(SB)/4, $0x39506967
DATA expc<>+108(SB)/4, $0x39506967
DATA expc<>+112(SB)/4, $0x39506967
DATA expc<>+116(SB)/4, $0x39506967
DATA expc<>+120(SB)/4, $0x39506967
DATA expc<>+124(SB)/4, $0x39506967
DATA expc<>+128(SB)/4, $0x3ab743ce
DATA expc<>+132(SB)/4, $0x3ab743ce
DATA expc<>+136(SB)/4, $0x3ab743ce
DATA expc<>+140(SB)/4, $0x3ab743ce
DATA expc<>+144(SB)/4, $0x3ab743ce
DATA expc<>+148(SB)/4, $0x3ab743ce
DATA expc<>+152(SB)/4, $0x3ab743ce
DATA expc<>+156(SB)/4, $0x3ab743ce
DATA expc<>+160(SB)/4, $0x3c088908
DATA expc<>+164(SB)/4, $0x3c088908
DATA expc<>+168(SB)/4, $0x3c088908
DATA expc<>+172(SB)/4, $0x3c088908
DATA expc<>+176(SB)/4, $0x3c088908
DATA expc<>+180(SB)/4, $0x3c088908
DATA expc<>+184(SB)/4, $0x3c088908
DATA expc<>+188(SB)/4, $0x3c088908
DATA expc<>+192(SB)/4, $0x3d2aa9c1
DATA expc<>+196(SB)/4, $0x3d2aa9c1
DATA expc<>+200(SB)/4, $0x3d2aa9c1
DATA expc<>+204(SB)/4, $0x3d2aa9c1
DATA expc<>+208(SB)/4, $0x3d2aa9c1
DATA expc<>+212(SB)/4, $0x3d2aa9c1
DATA expc<>+216(SB)/4, $0x3d2aa9c1
DATA expc<>+220(SB)/4, $0x3d2aa9c1
DATA expc<>+224(SB)/4, $0x3e2aaaaa
DATA expc<>+228(SB)/4, $0x3e2aaaaa
DATA expc<>+232(SB)/4, $0x3e2aaaaa
DATA expc<>+236(SB)/4, $0x3e2aaaaa
DATA expc<>+240(SB)/4, $0x3e2aaaaa
DATA expc<>+244(SB)/4, $0x3e2aaaaa
DATA expc<>+248(SB)/4, $0x3e2aaaaa
DATA expc<>+252(SB)/4, $0x3e2aaaaa
DATA expc<>+256(SB)/4, $0x3f000000
DATA expc<>+260(SB)/4, $0x3f000000
DATA expc<>+264(SB)/4, $0x3f000000
DATA expc<>+268(SB)/4, $0x3f000000
DATA expc<>+272(SB)/4, $0x3f000000
DATA expc<>+276(SB)/4, $0x3f000000
DATA expc<>+280(SB)/4, $0x3f000000
DATA expc<>+284(SB)/4, $0x3f000000
DATA expc<>+288(SB)/4, $0x3f800000
DATA expc<>+292(SB)/4, $0x3f800000
DATA expc<>+296(SB)/4, $0x3f800000
DATA expc<>+300(SB)/4, $0x3f800000
DATA expc<>+304(SB)/4, $0x3f800000
DATA expc<>+308(SB)/4, $0x3f800000
DATA expc<>+312(SB)/4, $0x3f800000
DATA expc<>+316(SB)/4, $0x3f800000
DATA expc<>+320(SB)/4, $0x42fe0000
DATA expc<>+324(SB)/4, $0x42fe0000
DATA expc<>+328(SB)/4, $0x42fe0000
DATA expc<>+332(SB)/4, $0x42fe0000
DATA expc<>+336(SB)/4, $0x42fe0000
DATA expc<>+340(SB)/4, $0x42fe0000
DATA expc<>+344(SB)/4, $0x42fe0000
DATA expc<>+348(SB)/4, $0x42fe0000
DATA expc<>+352(SB)/4, $0x0000007f
DATA expc<>+356(SB)/4, $0x0000007f
DATA expc<>+360(SB)/4, $0x0000007f
DATA expc<>+364(SB)/4, $0x0000007f
DATA expc<>+368(SB)/4, $0x0000007f
DATA expc<>+372(SB)/4, $0x0000007f
DATA expc<>+376(SB)/4, $0x0000007f
DATA expc<>+380(SB)/4, $0x0000007f
DATA expc<>+384(SB)/4, $0xc2aeac4f
DATA expc<>+388(SB)/4, $0xc2aeac4f
DATA expc<>+392(SB)/4, $0xc2aeac4f
DATA expc<>+396(SB)/4, $0xc2aeac4f
DATA expc<>+400(SB)/4, $0xc2aeac4f
DATA expc<>+404(SB)/4, $0xc2aeac4f
DATA expc<>+408(SB)/4, $0xc2aeac4f
DATA expc<>+412(SB)/4, $0xc2aeac4f
DATA expc<>+416(SB)/4, $0x42b17217
DATA expc<>+420(SB)/4, $0x42b17217
DATA expc<>+424(SB)/4, $0x42b17217
DATA expc<>+428(SB)/4, $0x42b17217
DATA expc<>+432(SB)/4, $0x42b17217
DATA expc<>+436(SB)/4, $0x42b17217
DATA expc<>+440(SB)/4, $0x42b17217
DATA expc<>+444(SB)/4, $0x42b17217
DATA expc<>+448(SB)/4, $0x7f800000
DATA expc<>+452(SB)/4, $0x7f800000
DATA expc<>+456(SB)/4, $0x7f800000
DATA expc<>+460(SB)/4, $0x7f800000
DATA expc<>+464(SB)/4, $0x7f800000
DATA expc<>+468(SB)/4, $0x7f800000
DATA expc<>+472(SB)/4, $0x7f800000
DATA expc<>+476(SB)/4, $0x7f800000
DATA expc<>+480(SB)/4, $0x80000000
DATA expc<>+484(SB)/4, $0x80000000
DATA expc<>+488(SB)/4, $0x80000000
DATA expc<>+492(SB)/4, $0x80000000
DATA expc<>+496(SB)/4, $0x80000000
DATA expc<>+500(SB)/4, $0x80000000
DATA expc<>+504(SB)/4, $0x80000000
DATA expc<>+508(SB)/4, $0x80000000
GLOBL expc<>(SB), RODATA|NOPTR, $512

// EXP8(X, R) sets R to Exp of the 8 lanes of X; X is kept, Y10-Y15 are clobbered.
#define EXP8(X, R) \
	VMULPS expc<>+0(SB), X, Y10; \
	VROUNDPS $0, Y10, Y10; \
	VMULPS expc<>+32(SB), Y10, Y11; \
	VSUBPS Y11, X, Y11; \
	VMULPS expc<>+64(SB), Y10, Y12; \
	VSUBPS Y12, Y11, Y11; \
	VMULPS expc<>+96(SB), Y11, R; \
	VADDPS expc<>+128(SB), R, R; \
	VMULPS Y11, R, R; \
	VADDPS expc<>+160(SB), R, R; \
	VMULPS Y11, R, R; \
	VADDPS expc<>+192(SB), R, R; \
	VMULPS Y11, R, R; \
	VADDPS expc<>+224(SB), R, R; \
	VMULPS Y11, R, R; \
	VADDPS expc<>+256(SB), R, R; \
	VMULPS Y11, Y11, Y12; \
	VMULPS Y12, R, R; \
	VADDPS Y11, R, R; \
	VADDPS expc<>+288(SB), R, R; \
	VCMPPS $0x1e, expc<>+320(SB), Y10, Y13; \
	VANDPS expc<>+288(SB), Y13, Y13; \
	VADDPS expc<>+288(SB), Y13, Y13; \
	VMULPS Y13, R, R; \
	VMINPS expc<>+320(SB), Y10, Y10; \
	VCVTPS2DQ Y10, Y10; \
	VPADDD expc<>+352(SB), Y10, Y10; \
	VPSLLD $23, Y10, Y10; \
	VMULPS Y10, R, R; \
	VCMPPS $0x1e, expc<>+384(SB), X, Y14; \
	VANDPS Y14, R, R; \
	VCMPPS $0x1e, expc<>+416(SB), X, Y15; \
	VBLENDVPS Y15, expc<>+448(SB), R, R; \
	VCMPPS $3, X, X, Y15; \
	VBLENDVPS Y15, X, R, R


// func expAVX2(dst, src *float32, n int)
TEXT ·expAVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JEQ expdone
exploop:
	VMOVUPS (SI), Y0
	EXP8(Y0, Y1)
	VMOVUPS Y1, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNE exploop
expdone:
	VZEROUPPER
	RET

// func sigmoidAVX2(dst, src *float32, n int, silu bool)
TEXT ·sigmoidAVX2(SB), NOSPLIT, $0-25
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVBQZX silu+24(FP), AX
	SHRQ $3, CX
	JEQ sigdone
sigloop:
	VMOVUPS (SI), Y2
	VXORPS expc<>+480(SB), Y2, Y0
	EXP8(Y0, Y1)
	VADDPS expc<>+288(SB), Y1, Y1
	VMOVUPS expc<>+288(SB), Y3
	VDIVPS Y1, Y3, Y1
	TESTQ AX, AX
	JEQ sigstore
	VMULPS Y1, Y2, Y1
sigstore:
	VMOVUPS Y1, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNE sigloop
sigdone:
	VZEROUPPER
	RET

// func expSubSumAVX2(s *float32, n int, m float32, sums *[8]float32)
// s[i] = Exp(s[i] − m) for i < n (a multiple of 8); sums[l] += the lane-l values in order.
TEXT ·expSubSumAVX2(SB), NOSPLIT, $0-32
	MOVQ s+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSS m+16(FP), Y4
	MOVQ sums+24(FP), DX
	VMOVUPS (DX), Y5
	SHRQ $3, CX
	JEQ essdone
essloop:
	VMOVUPS (SI), Y0
	VSUBPS Y4, Y0, Y0
	EXP8(Y0, Y1)
	VMOVUPS Y1, (SI)
	VADDPS Y1, Y5, Y5
	ADDQ $32, SI
	DECQ CX
	JNE essloop
essdone:
	VMOVUPS Y5, (DX)
	VZEROUPPER
	RET
