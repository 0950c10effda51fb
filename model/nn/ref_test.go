package nn

// Naive float64-accumulating reference implementations of the ops, written directly from
// the PyTorch definitions, used by the tests.

import (
	"math"
	"math/rand/v2"

	"github.com/vdpp/vdpp/tensor"
)

func randDense(r *rand.Rand, shape ...int) *tensor.Dense {
	d := tensor.New(shape...)
	for i := range d.Data {
		d.Data[i] = float32(r.NormFloat64())
	}
	return d
}

func strides(shape []int) []int {
	s := make([]int, len(shape))
	acc := 1
	for i := len(shape) - 1; i >= 0; i-- {
		s[i] = acc
		acc *= shape[i]
	}
	return s
}

func refLinear(x, w, b *tensor.Dense) *tensor.Dense {
	in := w.Shape[1]
	out := w.Shape[0]
	rows := len(x.Data) / in
	shape := append(append([]int(nil), x.Shape[:len(x.Shape)-1]...), out)
	y := tensor.New(shape...)
	for r := range rows {
		for o := range out {
			var s float64
			for i := range in {
				s += float64(x.Data[r*in+i]) * float64(w.Data[o*in+i])
			}
			if b != nil {
				s += float64(b.Data[o])
			}
			y.Data[r*out+o] = float32(s)
		}
	}
	return y
}

func refMap(x *tensor.Dense, f func(float64) float64) *tensor.Dense {
	y := x.Clone()
	for i, v := range x.Data {
		y.Data[i] = float32(f(float64(v)))
	}
	return y
}

func geluRef(v float64) float64 { return 0.5 * v * (1 + math.Erf(v/math.Sqrt2)) }
func siluRef(v float64) float64 { return v / (1 + math.Exp(-v)) }

// refConv is conv{1,2,3}d with stride and per-axis (before, after) zero padding.
func refConv(x, w, b *tensor.Dense, stride int, pads [][2]int) *tensor.Dense {
	d := len(x.Shape) - 2
	n, c, o := x.Shape[0], x.Shape[1], w.Shape[0]
	sp := x.Shape[2:]
	ks := w.Shape[2:]
	out := make([]int, d)
	for i := range d {
		out[i] = (sp[i]+pads[i][0]+pads[i][1]-ks[i])/stride + 1
	}
	yshape := append([]int{n, o}, out...)
	y := tensor.New(yshape...)
	xs, ws, ys := strides(x.Shape), strides(w.Shape), strides(yshape)
	opos := make([]int, d)
	kpos := make([]int, d)
	nout := tensor.NumElements(out)
	nk := tensor.NumElements(ks)
	for bi := range n {
		for oc := range o {
			for op := range nout {
				rem := op
				for i := d - 1; i >= 0; i-- {
					opos[i] = rem % out[i]
					rem /= out[i]
				}
				var s float64
				if b != nil {
					s = float64(b.Data[oc])
				}
				for ic := range c {
					for kp := range nk {
						rem := kp
						for i := d - 1; i >= 0; i-- {
							kpos[i] = rem % ks[i]
							rem /= ks[i]
						}
						xi := bi*xs[0] + ic*xs[1]
						wi := oc*ws[0] + ic*ws[1]
						inside := true
						for i := range d {
							p := opos[i]*stride + kpos[i] - pads[i][0]
							if p < 0 || p >= sp[i] {
								inside = false
								break
							}
							xi += p * xs[2+i]
							wi += kpos[i] * ws[2+i]
						}
						if inside {
							s += float64(x.Data[xi]) * float64(w.Data[wi])
						}
					}
				}
				yi := bi*ys[0] + oc*ys[1]
				for i := range d {
					yi += opos[i] * ys[2+i]
				}
				y.Data[yi] = float32(s)
			}
		}
	}
	return y
}

func refGroupNorm(x, gamma, beta *tensor.Dense, groups int, eps float64) *tensor.Dense {
	n, c := x.Shape[0], x.Shape[1]
	inner := len(x.Data) / (n * c)
	cg := c / groups
	y := x.Clone()
	for bi := range n {
		for g := range groups {
			start := (bi*c + g*cg) * inner
			seg := x.Data[start : start+cg*inner]
			var mean float64
			for _, v := range seg {
				mean += float64(v)
			}
			mean /= float64(len(seg))
			var vr float64
			for _, v := range seg {
				vr += (float64(v) - mean) * (float64(v) - mean)
			}
			vr /= float64(len(seg))
			for i, v := range seg {
				ch := g*cg + i/inner
				z := (float64(v) - mean) / math.Sqrt(vr+eps)
				if gamma != nil {
					z *= float64(gamma.Data[ch])
				}
				if beta != nil {
					z += float64(beta.Data[ch])
				}
				y.Data[start+i] = float32(z)
			}
		}
	}
	return y
}

func refLayerNorm(x, gamma, beta *tensor.Dense, eps float64) *tensor.Dense {
	dim := x.Shape[len(x.Shape)-1]
	y := x.Clone()
	for r := 0; r < len(x.Data); r += dim {
		seg := x.Data[r : r+dim]
		var mean, vr float64
		for _, v := range seg {
			mean += float64(v)
		}
		mean /= float64(dim)
		for _, v := range seg {
			vr += (float64(v) - mean) * (float64(v) - mean)
		}
		vr /= float64(dim)
		for i, v := range seg {
			z := (float64(v) - mean) / math.Sqrt(vr+eps)
			if gamma != nil {
				z = z*float64(gamma.Data[i]) + float64(beta.Data[i])
			}
			y.Data[r+i] = float32(z)
		}
	}
	return y
}

func refAttention(q, k, v *tensor.Dense, heads int) *tensor.Dense {
	b, sq, dm := q.Shape[0], q.Shape[1], q.Shape[2]
	sk := k.Shape[1]
	d := dm / heads
	y := tensor.New(b, sq, dm)
	scale := 1 / math.Sqrt(float64(d))
	sc := make([]float64, sk)
	for bi := range b {
		for h := range heads {
			for i := range sq {
				mx := math.Inf(-1)
				for j := range sk {
					var s float64
					for e := range d {
						s += float64(q.Data[(bi*sq+i)*dm+h*d+e]) * float64(k.Data[(bi*sk+j)*dm+h*d+e])
					}
					sc[j] = s * scale
					mx = max(mx, sc[j])
				}
				var z float64
				for j := range sk {
					sc[j] = math.Exp(sc[j] - mx)
					z += sc[j]
				}
				for e := range d {
					var s float64
					for j := range sk {
						s += sc[j] / z * float64(v.Data[(bi*sk+j)*dm+h*d+e])
					}
					y.Data[(bi*sq+i)*dm+h*d+e] = float32(s)
				}
			}
		}
	}
	return y
}

func refTimesteps(t []float32, dim int, flip bool, shift float64) *tensor.Dense {
	half := dim / 2
	y := tensor.New(len(t), dim)
	for r, tv := range t {
		for j := range half {
			f := math.Exp(-math.Log(10000) * float64(j) / (float64(half) - shift))
			a := float64(tv) * f
			s, c := math.Sin(a), math.Cos(a)
			if flip {
				s, c = c, s
			}
			y.Data[r*dim+j] = float32(s)
			y.Data[r*dim+half+j] = float32(c)
		}
	}
	return y
}

func refUpsample2x(x *tensor.Dense) *tensor.Dense {
	n, c, h, w := x.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3]
	y := tensor.New(n, c, 2*h, 2*w)
	for p := range n * c {
		for i := range 2 * h {
			for j := range 2 * w {
				y.Data[(p*2*h+i)*2*w+j] = x.Data[(p*h+i/2)*w+j/2]
			}
		}
	}
	return y
}
