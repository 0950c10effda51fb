package sched

import (
	"math"
)

// This file ports the three SLEEF 3.5.1 functions torch 1.13's CPU kernels call for float32
// log, expm1 and exp (Sleef_logf8_u10, Sleef_expm1f8_u10 and Sleef_expf8_u10, AVX2 with
// FMA), so that the UniPC and DPM-Solver coefficients round like the reference's. They are accurate to 1 ulp, not correctly
// rounded; the port reproduces SLEEF's exact operation sequence (double-float arithmetic,
// FMAs) one element at a time.

// fmaf32 is a·b + c rounded once to float32. The product is exact in float64; the sum is
// formed in float64 with round-to-odd (from the TwoSum error), which makes the final
// rounding to float32 correct.
func fmaf32(a, b, c float32) float32 {
	p := float64(a) * float64(b)
	cc := float64(c)
	s := p + cc
	if math.IsInf(s, 0) || math.IsNaN(s) || s == 0 {
		return float32(s)
	}
	bb := s - p
	e := (p - (s - bb)) + (cc - bb)
	if e != 0 {
		bits := math.Float64bits(s)
		if (e > 0) != (s > 0) { // |exact| < |s|: truncate toward zero first
			bits--
		}
		s = math.Float64frombits(bits | 1)
	}
	return float32(s)
}

// df is SLEEF's double-float: the unevaluated sum x + y.
type df struct{ x, y float32 }

// dfAdd2FF is dfadd2_vf2_vf_vf.
func dfAdd2FF(x, y float32) df {
	s := x + y
	v := s - x
	return df{s, (x - (s - v)) + (y - v)}
}

// dfAdd2DF is dfadd2_vf2_vf2_vf.
func dfAdd2DF(x df, y float32) df {
	s := x.x + y
	v := s - x.x
	t := (x.x - (s - v)) + (y - v)
	return df{s, t + x.y}
}

// dfAdd2DD is dfadd2_vf2_vf2_vf2.
func dfAdd2DD(x, y df) df {
	s := x.x + y.x
	v := s - x.x
	t := (x.x - (s - v)) + (y.x - v)
	return df{s, t + (x.y + y.y)}
}

// dfAddDD is dfadd_vf2_vf2_vf2 (|x| ≥ |y|).
func dfAddDD(x, y df) df {
	s := x.x + y.x
	return df{s, (((x.x - s) + y.x) + x.y) + y.y}
}

// dfAddDF is dfadd_vf2_vf2_vf.
func dfAddDF(x df, y float32) df {
	s := x.x + y
	return df{s, ((x.x - s) + y) + x.y}
}

// dfAddFD is dfadd_vf2_vf_vf2.
func dfAddFD(x float32, y df) df {
	s := x + y.x
	return df{s, ((x - s) + y.x) + y.y}
}

// dfMulDF is dfmul_vf2_vf2_vf with FMA.
func dfMulDF(x df, y float32) df {
	s := x.x * y
	return df{s, fmaf32(x.y, y, fmaf32(x.x, y, -s))}
}

// dfMulDD is dfmul_vf2_vf2_vf2 with FMA.
func dfMulDD(x, y df) df {
	s := x.x * y.x
	return df{s, fmaf32(x.x, y.y, fmaf32(x.y, y.x, fmaf32(x.x, y.x, -s)))}
}

// dfSqu is dfsqu_vf2_vf2 with FMA.
func dfSqu(x df) df {
	s := x.x * x.x
	return df{s, fmaf32(x.x+x.x, x.y, fmaf32(x.x, x.x, -s))}
}

// dfDiv is dfdiv_vf2_vf2_vf2 with FMA.
func dfDiv(n, d df) df {
	t := 1 / d.x
	s := n.x * t
	u := fmaf32(t, n.x, -s)
	v := fmaf32(-d.y, t, fmaf32(-d.x, t, 1))
	return df{s, fmaf32(s, v, fmaf32(n.y, t, u))}
}

// pow2i is 2^q built from its exponent bits.
func pow2i(q int32) float32 { return math.Float32frombits(uint32(q+0x7f) << 23) }

// ldexp2 is vldexp2_vf_vf_vi2: d·2^(q>>1)·2^(q−q>>1).
func ldexp2(d float32, q int32) float32 { return d * pow2i(q>>1) * pow2i(q-q>>1) }

// sleefLogf is SLEEF's xlogf_u1 (Sleef_logf8_u10), non-AVX512 path.
func sleefLogf(d float32) float32 {
	const fltMin = 1.17549435e-38
	o := d < fltMin
	if o {
		d *= float32(1<<32) * float32(1<<32)
	}
	e := int32((math.Float32bits(d*float32(1.0/0.75))>>23)&0xff) - 0x7f
	m := math.Float32frombits(math.Float32bits(d) + uint32(-e)<<23)
	if o {
		e -= 64
	}
	s := dfMulDF(df{0.69314718246459960938, -1.904654323148236017e-09}, float32(e))
	x := dfDiv(dfAdd2FF(-1, m), dfAdd2FF(1, m))
	x2 := x.x * x.x
	t := float32(+0.3027294874e+0)
	t = fmaf32(t, x2, +0.3996108174e+0)
	t = fmaf32(t, x2, +0.6666694880e+0)
	s = dfAddDD(s, df{float32(x.x * 2), float32(x.y * 2)})
	s = dfAddDF(s, float32(x2*x.x*t))
	r := s.x + s.y
	switch {
	case math.IsInf(float64(d), 1):
		r = float32(math.Inf(1))
	case d < 0 || d != d:
		r = float32(math.NaN())
	case d == 0:
		r = float32(math.Inf(-1))
	}
	return r
}

// expk2f is SLEEF's expk2f: e^d for a double-float d, as a double-float.
func expk2f(d df) df {
	const (
		rLn2 = 1.442695040888963407359924681001892137426645954152985934135449406931
		l2U  = 0.693145751953125
		l2L  = 1.428606765330187045e-06
	)
	u := (d.x + d.y) * float32(rLn2)
	q := int32(math.RoundToEven(float64(u)))   // cvtps_epi32, round to nearest even
	s := dfAdd2DF(d, float32(float32(q)*-l2U)) // float32(...): never fused into an FMA
	s = dfAdd2DF(s, float32(float32(q)*-l2L))
	u = float32(+0.1980960224e-3)
	u = fmaf32(u, s.x, +0.1394256484e-2)
	u = fmaf32(u, s.x, +0.8333456703e-2)
	u = fmaf32(u, s.x, +0.4166637361e-1)
	t := dfAdd2DF(dfMulDF(s, u), +0.166666659414234244790680580464e+0)
	t = dfAdd2DF(dfMulDD(s, t), 0.5)
	t = dfAdd2DD(s, dfMulDD(dfSqu(s), t))
	t = dfAddFD(1, t)
	t = df{ldexp2(t.x, q), ldexp2(t.y, q)}
	if d.x < -104 {
		t = df{}
	}
	return t
}

// sleefExpm1f is SLEEF's xexpm1f (Sleef_expm1f8_u10).
func sleefExpm1f(a float32) float32 {
	d := dfAdd2DF(expk2f(df{a, 0}), -1)
	x := d.x + d.y
	switch {
	case a > 88.72283172607421875:
		x = float32(math.Inf(1))
	case a < -16.635532333438687426013570:
		x = -1
	case a == 0 && math.Signbit(float64(a)):
		x = a
	}
	return x
}

// sleefExpf is SLEEF's xexpf (Sleef_expf8_u10, the float32 exp of torch 1.13's CPU
// kernels): a Cody–Waite reduction by ln 2 with FMAs, a degree-6 polynomial and a scale by
// 2^q.
func sleefExpf(d float32) float32 {
	const (
		rLn2 = 1.442695040888963407359924681001892137426645954152985934135449406931
		l2U  = 0.693145751953125
		l2L  = 1.428606765330187045e-06
	)
	q := int32(math.RoundToEven(float64(d * float32(rLn2)))) // cvtps_epi32
	qf := float32(q)
	s := fmaf32(qf, -l2U, d)
	s = fmaf32(qf, -l2L, s)
	u := float32(0.000198527617612853646278381)
	u = fmaf32(u, s, 0.00139304355252534151077271)
	u = fmaf32(u, s, 0.00833336077630519866943359)
	u = fmaf32(u, s, 0.0416664853692054748535156)
	u = fmaf32(u, s, 0.166666671633720397949219)
	u = fmaf32(u, s, 0.5)
	u = 1 + fmaf32(float32(s*s), u, s)
	u = ldexp2(u, q)
	switch {
	case d < -104:
		u = 0
	case d > 100:
		u = float32(math.Inf(1))
	}
	return u
}
