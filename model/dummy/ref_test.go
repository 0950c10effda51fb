package dummy

// A naive float64 Go implementation of the dummy network, written from the package doc,
// for the tests.

import (
	"math"

	"github.com/vdpp/vdpp/tensor"
)

// refConv3d is conv3d with kernel 3, padding 1 on x [C, T, H, W] (one row).
func refConv3d(x []float32, cin, tt, hh, ww int, w, b *tensor.Dense) []float64 {
	cout := w.Shape[0]
	y := make([]float64, cout*tt*hh*ww)
	for o := range cout {
		for t := range tt {
			for i := range hh {
				for j := range ww {
					s := float64(b.Data[o])
					for c := range cin {
						for kt := range 3 {
							for ki := range 3 {
								for kj := range 3 {
									pt, pi, pj := t+kt-1, i+ki-1, j+kj-1
									if pt < 0 || pt >= tt || pi < 0 || pi >= hh || pj < 0 || pj >= ww {
										continue
									}
									s += float64(x[((c*tt+pt)*hh+pi)*ww+pj]) * float64(w.Data[(((o*cin+c)*3+kt)*3+ki)*3+kj])
								}
							}
						}
					}
					y[((o*tt+t)*hh+i)*ww+j] = s
				}
			}
		}
	}
	return y
}

// refPredictRow computes one row: lat [T, C, H, W], returns [T, C, H, W].
func refPredictRow(cfg Config, w map[string]*tensor.Dense, lat []float32, tt, hh, ww int, timestep float32, vec []float32) []float32 {
	C, Hd := cfg.LatentChannels, cfg.HiddenChannels
	// Permute to [C, T, H, W].
	x := make([]float32, len(lat))
	for t := range tt {
		for c := range C {
			copy(x[((c*tt+t)*hh)*ww:((c*tt+t)*hh+hh)*ww], lat[((t*C+c)*hh)*ww:((t*C+c)*hh+hh)*ww])
		}
	}
	h := refConv3d(x, C, tt, hh, ww, w["conv_in.weight"], w["conv_in.bias"])
	// Embedding per hidden channel.
	emb := make([]float64, Hd)
	half := TimeDim / 2
	temb := make([]float64, TimeDim)
	for j := range half {
		f := math.Exp(-math.Log(10000) * float64(j) / float64(half))
		a := float64(timestep) * f
		temb[j], temb[half+j] = math.Cos(a), math.Sin(a) // flip_sin_to_cos
	}
	for o := range Hd {
		s := float64(w["time_proj.bias"].Data[o])
		for k := range TimeDim {
			s += float64(w["time_proj.weight"].Data[o*TimeDim+k]) * temb[k]
		}
		for c := range C {
			s += float64(w["cond_proj.weight"].Data[o*C+c]) * float64(vec[c])
		}
		emb[o] = s
	}
	// LayerNorm over channels at each position, then + emb.
	plane := tt * hh * ww
	hn := make([]float32, len(h))
	for p := range plane {
		var mean, vr float64
		for o := range Hd {
			mean += h[o*plane+p]
		}
		mean /= float64(Hd)
		for o := range Hd {
			vr += (h[o*plane+p] - mean) * (h[o*plane+p] - mean)
		}
		vr /= float64(Hd)
		for o := range Hd {
			z := (h[o*plane+p]-mean)/math.Sqrt(vr+1e-5)*float64(w["norm.weight"].Data[o]) + float64(w["norm.bias"].Data[o])
			hn[o*plane+p] = float32(z + emb[o])
		}
	}
	y := refConv3d(hn, Hd, tt, hh, ww, w["conv_out.weight"], w["conv_out.bias"])
	out := make([]float32, len(lat))
	for t := range tt {
		for c := range C {
			for k := range hh * ww {
				out[(t*C+c)*hh*ww+k] = float32(y[(c*tt+t)*hh*ww+k])
			}
		}
	}
	return out
}
