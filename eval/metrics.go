package eval

import (
	"fmt"
	"math"
)

// MaxPSNR caps the PSNR of identical images (whose MSE is 0).
const MaxPSNR = 100.0

// PSNR returns 10·log10(1/MSE) for two images with values in [0, 1], capped at MaxPSNR.
func PSNR(a, b []float32) (float64, error) {
	if len(a) != len(b) || len(a) == 0 {
		return 0, fmt.Errorf("eval: psnr of %d and %d values", len(a), len(b))
	}
	var s float64
	for i := range a {
		d := float64(a[i]) - float64(b[i])
		s += d * d
	}
	mse := s / float64(len(a))
	if mse == 0 {
		return MaxPSNR, nil
	}
	return min(10*math.Log10(1/mse), MaxPSNR), nil
}

// SSIM constants for data range 1 (Wang et al. 2004).
const (
	ssimC1     = 0.01 * 0.01
	ssimC2     = 0.03 * 0.03
	ssimRadius = 5 // 11x11 window
	ssimSigma  = 1.5
)

// gaussian11 is the normalised 1-D Gaussian window of SSIM.
func gaussian11() []float64 {
	w := make([]float64, 2*ssimRadius+1)
	var s float64
	for i := range w {
		x := float64(i - ssimRadius)
		w[i] = math.Exp(-x * x / (2 * ssimSigma * ssimSigma))
		s += w[i]
	}
	for i := range w {
		w[i] /= s
	}
	return w
}

// blur filters a plane h x w with the separable window, treating pixels outside as absent
// (the window is renormalised at the borders).
func blur(p []float64, h, w int, k []float64) []float64 {
	r := len(k) / 2
	tmp := make([]float64, len(p))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			var s, ws float64
			for i := -r; i <= r; i++ {
				if xx := x + i; xx >= 0 && xx < w {
					s += k[i+r] * p[y*w+xx]
					ws += k[i+r]
				}
			}
			tmp[y*w+x] = s / ws
		}
	}
	out := make([]float64, len(p))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			var s, ws float64
			for i := -r; i <= r; i++ {
				if yy := y + i; yy >= 0 && yy < h {
					s += k[i+r] * tmp[yy*w+x]
					ws += k[i+r]
				}
			}
			out[y*w+x] = s / ws
		}
	}
	return out
}

// SSIM returns the mean structural similarity of two images [C, H, W] with values in
// [0, 1]: the SSIM map with an 11x11 Gaussian window (σ = 1.5), averaged over pixels and
// channels.
func SSIM(a, b []float32, c, h, w int) (float64, error) {
	n := c * h * w
	if len(a) != n || len(b) != n || n == 0 {
		return 0, fmt.Errorf("eval: ssim of %d and %d values for [%d,%d,%d]", len(a), len(b), c, h, w)
	}
	k := gaussian11()
	var total float64
	for ch := 0; ch < c; ch++ {
		pa := make([]float64, h*w)
		pb := make([]float64, h*w)
		paa := make([]float64, h*w)
		pbb := make([]float64, h*w)
		pab := make([]float64, h*w)
		for i := range pa {
			x, y := float64(a[ch*h*w+i]), float64(b[ch*h*w+i])
			pa[i], pb[i], paa[i], pbb[i], pab[i] = x, y, x*x, y*y, x*y
		}
		ma, mb := blur(pa, h, w, k), blur(pb, h, w, k)
		saa, sbb, sab := blur(paa, h, w, k), blur(pbb, h, w, k), blur(pab, h, w, k)
		for i := range ma {
			va := saa[i] - ma[i]*ma[i]
			vb := sbb[i] - mb[i]*mb[i]
			cov := sab[i] - ma[i]*mb[i]
			total += ((2*ma[i]*mb[i] + ssimC1) * (2*cov + ssimC2)) /
				((ma[i]*ma[i] + mb[i]*mb[i] + ssimC1) * (va + vb + ssimC2))
		}
	}
	return total / float64(n), nil
}
