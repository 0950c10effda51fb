package sched

import (
	"math"
)

// Scalar float32 helpers for the UniPC coefficients, which diffusers computes on 0-dim
// float32 torch tensors. Every product that feeds a sum is wrapped in an explicit
// float32(...) conversion: Go may otherwise fuse a·b + c into one FMA, torch does not.

// log32 is the natural logarithm of a float32, correctly rounded. torch's float32 log
// (SLEEF, 1 ulp) may differ from it by one ulp.
func log32(x float32) float32 { return float32(math.Log(float64(x))) }

// expm1f32 is e^x − 1 for a float32, correctly rounded (torch's SLEEF expm1 may differ by
// one ulp).
func expm1f32(x float32) float32 { return float32(math.Expm1(float64(x))) }

// powi32 is torch.pow(x, e) for a float32 tensor and a non-negative integer exponent:
// torch special-cases 0 (ones), 1 (copy), 2 (x·x) and 3 (x·x·x) and calls std::pow
// otherwise.
func powi32(x float32, e int) float32 {
	switch e {
	case 0:
		return 1
	case 1:
		return x
	case 2:
		return x * x
	case 3:
		return x * x * x
	}
	return float32(math.Pow(float64(x), float64(e)))
}

// solve32 is torch.linalg.solve(A, b) for a small float32 system as the reference LAPACK
// computes it (sgetrf: partial pivoting on the first largest |a|, the column scaled by the
// float32 reciprocal of the pivot, rank-1 updates; sgetrs: unit-lower forward, then upper
// backward substitution dividing by the diagonal). a is row-major n×n and is not modified.
// A singular system yields Inf/NaN entries, as LAPACK's info > 0 makes torch raise; the
// caller's inputs never are singular for distinct sigmas.
func solve32(a []float32, b []float32) []float32 {
	n := len(b)
	m := make([]float32, len(a))
	copy(m, a)
	x := make([]float32, n)
	copy(x, b)
	at := func(i, j int) *float32 { return &m[i*n+j] }
	piv := make([]int, n)
	for j := range n {
		p := j
		for i := j + 1; i < n; i++ {
			if abs32(*at(i, j)) > abs32(*at(p, j)) {
				p = i
			}
		}
		piv[j] = p
		if p != j {
			for k := range n {
				*at(j, k), *at(p, k) = *at(p, k), *at(j, k)
			}
		}
		if d := *at(j, j); d != 0 {
			if abs32(d) >= math.SmallestNonzeroFloat32*(1<<23) { // sfmin: the smallest normal
				r := 1 / d
				for i := j + 1; i < n; i++ {
					*at(i, j) *= r
				}
			} else {
				for i := j + 1; i < n; i++ {
					*at(i, j) /= d
				}
			}
		}
		for i := j + 1; i < n; i++ {
			l := *at(i, j)
			for k := j + 1; k < n; k++ {
				*at(i, k) -= float32(l * *at(j, k))
			}
		}
	}
	for j, p := range piv {
		x[j], x[p] = x[p], x[j]
	}
	for k := range n {
		if x[k] != 0 {
			for i := k + 1; i < n; i++ {
				x[i] -= float32(x[k] * *at(i, k))
			}
		}
	}
	for k := n - 1; k >= 0; k-- {
		if x[k] != 0 {
			x[k] /= *at(k, k)
			for i := range k {
				x[i] -= float32(x[k] * *at(i, k))
			}
		}
	}
	return x
}

func abs32(x float32) float32 { return float32(math.Abs(float64(x))) }
