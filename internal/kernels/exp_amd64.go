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

func expSlice(dst, src []float32) { vecMap(dst, src, expAVX2) }

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
