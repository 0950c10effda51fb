package kernels

import "math"

// Coefficients of Erf and Tanh, fitted for this package (weighted least squares on
// Chebyshev nodes, then rounded to float32): erf(x) = x·A(x²) on |x| < 1, erfc(x) =
// exp(B(x)) on 1 ≤ x < 4, tanh(x) = x + x³·T(x²) on |x| < 0.625. Highest degree first.
var (
	erfA = [...]float32{-9.92202967609046e-06, 0.00011353028821758926, -0.0008495765505358577,
		0.005221810657531023, -0.026865698397159576, 0.11283786594867706, -0.37612637877464294,
		1.128379225730896}
	erfB = [...]float32{-4.547568721591233e-08, 1.0719678584791836e-06, -9.45706051425077e-06,
		2.0235020201653242e-05, 0.0003438386775087565, -0.004116162657737732,
		0.025317147374153137, -0.10881879925727844, -0.6327444911003113, -1.1298483610153198,
		0.0002494429354555905}
	tanhT = [...]float32{0.0023663430474698544, -0.008414652198553085, 0.021792810410261154,
		-0.053962595760822296, 0.1333332061767578, -0.3333333432674408}
)

// horner evaluates c (highest degree first) at t, rounding every step to float32.
func horner(c []float32, t float32) float32 {
	p := c[0]
	for _, v := range c[1:] {
		p = float32(float32(p*t) + v)
	}
	return p
}

// Erf is the error function in float32 arithmetic, within 3 ulp (1.5e−7 absolute).
func Erf(x float32) float32 {
	a := float32(math.Abs(float64(x)))
	if a < 1 {
		return float32(x * horner(erfA[:], float32(x*x)))
	}
	if !(a < 4) {
		if x != x {
			return x
		}
		return float32(math.Copysign(1, float64(x)))
	}
	r := float32(1 - Exp(horner(erfB[:], a)))
	return float32(math.Copysign(float64(r), float64(x)))
}

// Tanh is the hyperbolic tangent in float32 arithmetic, within 2 ulp.
func Tanh(x float32) float32 {
	a := float32(math.Abs(float64(x)))
	if a < 0.625 {
		x2 := float32(x * x)
		return float32(x + float32(float32(x*x2)*horner(tanhT[:], x2)))
	}
	if !(a <= 9) {
		if x != x {
			return x
		}
		return float32(math.Copysign(1, float64(x)))
	}
	e := Exp(float32(a + a))
	r := float32(1 - float32(2/float32(e+1)))
	return float32(math.Copysign(float64(r), float64(x)))
}

// ErfSlice sets dst[i] = Erf(src[i]) (vector code where the CPU has it, the same bits).
func ErfSlice(dst, src []float32) {
	if vecExp {
		erfSlice(dst, src)
		return
	}
	for i, v := range src {
		dst[i] = Erf(v)
	}
}

// TanhSlice sets dst[i] = Tanh(src[i]).
func TanhSlice(dst, src []float32) {
	if vecExp {
		tanhSlice(dst, src)
		return
	}
	for i, v := range src {
		dst[i] = Tanh(v)
	}
}
