package sched

import (
	"math"
)

// Scalar float32 helpers for the UniPC coefficients, which diffusers computes on 0-dim
// float32 torch tensors. Every product that feeds a sum is wrapped in an explicit
// float32(...) conversion: Go may otherwise fuse a·b + c into one FMA, torch does not.

// log32 is torch's float32 log: SLEEF's, within 1 ulp but not correctly rounded.
func log32(x float32) float32 { return sleefLogf(x) }

// expm1f32 is torch's float32 expm1 (SLEEF's).
func expm1f32(x float32) float32 { return sleefExpm1f(x) }

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

// solve32 is torch.linalg.solve(A, b) for a small float32 system as torch 1.13 computes it
// with the reference LAPACK. a is row-major n×n and is not modified. rowMajor says whether
// torch received A contiguous: then it factors the buffer as LAPACK's column-major matrix,
// that is Aᵀ, and solves with sgetrs' transposed path; otherwise (a sliced view) it copies
// A to column-major and takes the plain path. Both use sgetrf (partial pivoting on the
// first largest |a|, the column scaled by the float32 reciprocal of the pivot, rank-1
// updates) and reference STRSM's operation order. A singular system yields Inf/NaN
// entries where torch would raise; distinct sigmas never give one.
func solve32(a []float32, b []float32, rowMajor bool) []float32 {
	n := len(b)
	m := make([]float32, len(a))
	if rowMajor {
		for i := range n {
			for j := range n {
				m[i*n+j] = a[j*n+i]
			}
		}
	} else {
		copy(m, a)
	}
	piv := lu32(m, n)
	at := func(i, j int) float32 { return m[i*n+j] }
	x := make([]float32, n)
	copy(x, b)
	if !rowMajor {
		// sgetrs 'N': P, then L (unit lower) forward, then U backward.
		for j, p := range piv {
			x[j], x[p] = x[p], x[j]
		}
		for k := range n {
			if x[k] != 0 {
				for i := k + 1; i < n; i++ {
					x[i] -= float32(x[k] * at(i, k))
				}
			}
		}
		for k := n - 1; k >= 0; k-- {
			if x[k] != 0 {
				x[k] /= at(k, k)
				for i := range k {
					x[i] -= float32(x[k] * at(i, k))
				}
			}
		}
		return x
	}
	// sgetrs 'T' on the factors of Aᵀ: Uᵀ forward, Lᵀ backward, then P in reverse.
	for i := range n {
		t := x[i]
		for k := range i {
			t -= float32(at(k, i) * x[k])
		}
		x[i] = t / at(i, i)
	}
	for i := n - 1; i >= 0; i-- {
		t := x[i]
		for k := i + 1; k < n; k++ {
			t -= float32(at(k, i) * x[k])
		}
		x[i] = t
	}
	for j := n - 1; j >= 0; j-- {
		x[j], x[piv[j]] = x[piv[j]], x[j]
	}
	return x
}

// lu32 is sgetrf on the row-major n×n matrix m, in place: m becomes L (unit, below the
// diagonal) and U; the returned pivots say which row was swapped with row j at step j.
func lu32(m []float32, n int) []int {
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
	return piv
}

func abs32(x float32) float32 { return float32(math.Abs(float64(x))) }

// exp32 is torch's float32 exp (SLEEF's).
func exp32(x float32) float32 { return sleefExpf(x) }
