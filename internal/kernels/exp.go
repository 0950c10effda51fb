package kernels

import "math"

// Constants of Exp: ln 2 split in a part exact in float32 and the rest (Cody and Waite),
// and a degree-5 minimax polynomial for (e^r − 1 − r)/r² on [−ln2/2, ln2/2] (Cephes'
// expf). Inputs below expMin give 0 (e^−87.3 ≈ 1e−38 is the smallest normal float32),
// above expMax +Inf.
const (
	log2e  = 1.44269504088896341
	ln2Hi  = 0.693359375
	ln2Lo  = -2.12194440e-4
	expMin = -87.33654
	expMax = 88.72283
	expP0  = 1.9875691500e-4
	expP1  = 1.3981999507e-3
	expP2  = 8.3334519073e-3
	expP3  = 4.1665795894e-2
	expP4  = 1.6666665459e-1
	expP5  = 5.0000001201e-1
)

// Exp is e^x in float32 arithmetic, within 2 ulp of the exact value for normal results.
// Every product and sum is rounded to float32 (no fused multiply-add), so a vector
// version of the same steps gives the same bits.
func Exp(x float32) float32 {
	if !(x > expMin) {
		if x != x { // NaN
			return x
		}
		return 0
	}
	if x > expMax {
		return float32(math.Inf(1))
	}
	n := float32(math.RoundToEven(float64(float32(x * log2e))))
	r := float32(x - float32(n*ln2Hi))
	r = float32(r - float32(n*ln2Lo))
	p := float32(float32(expP0*r) + expP1)
	p = float32(float32(p*r) + expP2)
	p = float32(float32(p*r) + expP3)
	p = float32(float32(p*r) + expP4)
	p = float32(float32(p*r) + expP5)
	r2 := float32(r * r)
	p = float32(float32(float32(p*r2)+r) + 1)
	// 2^n for n in [−126, 128]: n = 128 only when x rounds up to expMax, done in two steps.
	ni := int32(n)
	if ni > 127 {
		return float32(p*2) * math.Float32frombits(uint32(ni-1+127)<<23)
	}
	return float32(p * math.Float32frombits(uint32(ni+127)<<23))
}

// Sigmoid is 1/(1 + e^−x) with Exp.
func Sigmoid(x float32) float32 { return 1 / float32(1+Exp(-x)) }

// SiLU is x·sigmoid(x).
func SiLU(x float32) float32 { return x * Sigmoid(x) }

// ExpSlice sets dst[i] = Exp(src[i]) (dst and src of one length; they may be the same).
func ExpSlice(dst, src []float32) {
	if vecExp {
		expSlice(dst, src)
		return
	}
	for i, v := range src {
		dst[i] = Exp(v)
	}
}

// SigmoidSlice sets dst[i] = Sigmoid(src[i]).
func SigmoidSlice(dst, src []float32) {
	if vecExp {
		sigmoidSlice(dst, src)
		return
	}
	for i, v := range src {
		dst[i] = Sigmoid(v)
	}
}

// SiLUSlice sets dst[i] = SiLU(src[i]).
func SiLUSlice(dst, src []float32) {
	if vecExp {
		siluSlice(dst, src)
		return
	}
	for i, v := range src {
		dst[i] = SiLU(v)
	}
}

// expSubSum sets s[i] = Exp(s[i] − m) and returns their sum, in an order fixed by len(s).
func expSubSum(s []float32, m float32) float32 {
	if vecExp {
		return expSubSumVec(s, m)
	}
	var sum float32
	for i, v := range s {
		e := Exp(v - m)
		s[i] = e
		sum += e
	}
	return sum
}

// maxOf returns the largest element of a non-empty s (NaN-free inputs).
func maxOf(s []float32) float32 {
	m := s[0]
	for _, v := range s[1:] {
		if v > m {
			m = v
		}
	}
	return m
}
