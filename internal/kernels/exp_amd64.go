package kernels

import (
	"math"

	"golang.org/x/sys/cpu"
)

// vecExp is whether the AVX2 forms of Exp, Sigmoid and SiLU run (they give the same bits
// as the Go functions; only the order of softmax sums differs, per process the same).
var vecExp = cpu.X86.HasAVX2

//go:noescape
func expAVX2(dst, src *float32, n int)

//go:noescape
func sigmoidAVX2(dst, src *float32, n int, silu bool)

//go:noescape
func erfAVX2(dst, src *float32, n int)

//go:noescape
func tanhAVX2(dst, src *float32, n int)

//go:noescape
func geluAVX2(dst, src *float32, n int)

//go:noescape
func geluTanhAVX2(dst, src *float32, n int)

//go:noescape
func addAVX2(dst, src *float32, n int)

//go:noescape
func addScalarAVX2(dst *float32, n int, b float32)

// addScalarVec sets dst[i] += b (the same float32 adds as the Go loop).
func addScalarVec(dst []float32, b float32) {
	n := len(dst) &^ 7
	if n > 0 {
		addScalarAVX2(&dst[0], n, b)
	}
	for i := n; i < len(dst); i++ {
		dst[i] += b
	}
}

//go:noescape
func binaryAVX2(dst, a, b *float32, n int, op int, scalarB bool)

// binaryVec sets dst[i] = a[i] op b[i] (b[0] when scalarB) for op Add, Sub, Mul or Div: 8
// lanes at a time, the tail in Go (the same float32 operations).
func binaryVec(op BinaryOp, dst, a, b []float32, scalarB bool) {
	n := len(dst) &^ 7
	if n > 0 {
		_ = a[n-1]
		if !scalarB {
			_ = b[n-1]
		}
		binaryAVX2(&dst[0], &a[0], &b[0], n, int(op), scalarB)
	}
	if n < len(dst) {
		bs := b[0:]
		if !scalarB {
			bs = b[n:]
		}
		sb := 1
		if scalarB {
			sb = 0
		}
		binaryScalarLoop(op, dst[n:], a[n:], bs, 1, sb)
	}
}

//go:noescape
func mulAVX2(dst, a, b *float32, n int)

// addVec sets dst[i] += src[i]: 8 lanes at a time, the tail in Go (the same float32 adds).
func addVec(dst, src []float32) {
	n := len(dst) &^ 7
	if n > 0 {
		_ = src[n-1]
		addAVX2(&dst[0], &src[0], n)
	}
	for i := n; i < len(dst); i++ {
		dst[i] += src[i]
	}
}

// mulVec sets dst[i] = a[i]·b[i].
func mulVec(dst, a, b []float32) {
	n := len(dst) &^ 7
	if n > 0 {
		_, _ = a[n-1], b[n-1]
		mulAVX2(&dst[0], &a[0], &b[0], n)
	}
	for i := n; i < len(dst); i++ {
		dst[i] = a[i] * b[i]
	}
}

//go:noescape
func sum64AVX2(s *float32, n int, out *[8]float64)

//go:noescape
func sqDev64AVX2(s *float32, n int, m float64, out *[8]float64)

//go:noescape
func affineAVX2(dst, src *float32, n int, mean, a, b float32, silu bool)

// lanes64 adds the 8 lane sums in a fixed order.
func lanes64(l *[8]float64) float64 {
	return ((l[0] + l[4]) + (l[1] + l[5])) + ((l[2] + l[6]) + (l[3] + l[7]))
}

// sum64Vec is sum64 with 8 lanes; the tail is added after them in index order.
func sum64Vec(s []float32) float64 {
	var l [8]float64
	n := len(s) &^ 7
	if n > 0 {
		sum64AVX2(&s[0], n, &l)
	}
	t := lanes64(&l)
	for _, v := range s[n:] {
		t += float64(v)
	}
	return t
}

// sqDev64Vec is sqDev64 with 8 lanes.
func sqDev64Vec(s []float32, m float64) float64 {
	var l [8]float64
	n := len(s) &^ 7
	if n > 0 {
		sqDev64AVX2(&s[0], n, m, &l)
	}
	t := lanes64(&l)
	for _, v := range s[n:] {
		x := float64(v) - m
		t += x * x
	}
	return t
}

// affineVec is affine with the vector code for every element (the tail through a padded
// copy), the same bits.
func affineVec(dst, src []float32, mean, a, b float32, silu bool) {
	vecMap(dst, src, func(d, s *float32, n int) { affineAVX2(d, s, n, mean, a, b, silu) })
}

//go:noescape
func expSubSumAVX2(s *float32, n int, m float32, sums *[8]float32)

// vecMap applies an 8-lane function to src into dst (same length), the last partial group
// through a padded copy so that every element takes the same path.
func vecMap(dst, src []float32, fn func(dst, src *float32, n int)) {
	n := len(src) &^ 7
	if n > 0 {
		fn(&dst[0], &src[0], n)
	}
	if n < len(src) {
		var in, out [8]float32
		copy(in[:], src[n:])
		fn(&out[0], &in[0], 8)
		copy(dst[n:], out[:len(src)-n])
	}
}

func expSlice(dst, src []float32)      { vecMap(dst, src, expAVX2) }
func erfSlice(dst, src []float32)      { vecMap(dst, src, erfAVX2) }
func tanhSlice(dst, src []float32)     { vecMap(dst, src, tanhAVX2) }
func geluSlice(dst, src []float32)     { vecMap(dst, src, geluAVX2) }
func geluTanhSlice(dst, src []float32) { vecMap(dst, src, geluTanhAVX2) }

func sigmoidSlice(dst, src []float32) {
	vecMap(dst, src, func(d, s *float32, n int) { sigmoidAVX2(d, s, n, false) })
}

func siluSlice(dst, src []float32) {
	vecMap(dst, src, func(d, s *float32, n int) { sigmoidAVX2(d, s, n, true) })
}

// expSubSumVec is expSubSum with 8 lane sums, added lane by lane at the end.
func expSubSumVec(s []float32, m float32) float32 {
	var sums [8]float32
	n := len(s) &^ 7
	if n > 0 {
		expSubSumAVX2(&s[0], n, m, &sums)
	}
	if n < len(s) {
		tail := [8]float32{}
		for i := range tail {
			tail[i] = float32(math.Inf(-1))
		}
		copy(tail[:], s[n:])
		expSubSumAVX2(&tail[0], 8, m, &sums)
		copy(s[n:], tail[:len(s)-n])
	}
	return ((sums[0] + sums[1]) + (sums[2] + sums[3])) + ((sums[4] + sums[5]) + (sums[6] + sums[7]))
}
