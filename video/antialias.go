package video

import (
	"fmt"
	"math"
	"slices"

	"github.com/vdpp/vdpp/tensor"
)

// bicubicA is PyTorch's cubic convolution coefficient for mode="bicubic".
const bicubicA = float32(-0.75)

// gaussianKernel is diffusers' _gaussian(window, sigma) in float32: taps at integer
// offsets −k/2..k/2 (shifted by 0.5 for an even window), exp(−x²/(2σ²)), normalised by
// their float32 sum.
func gaussianKernel(window int, sigma float32) []float32 {
	k := make([]float32, window)
	var sum float32
	den := 2 * float32(sigma*sigma)
	for i := range k {
		x := float32(i - window/2)
		if window%2 == 0 {
			x += 0.5
		}
		k[i] = float32(math.Exp(float64(-float32(x*x) / den)))
		sum += k[i]
	}
	for i := range k {
		k[i] /= sum
	}
	return k
}

// reflect maps i into [0, n) with reflect padding (edge not repeated), bouncing as
// often as needed (torch requires pad < n; this generalises it).
func reflect(i, n int) int {
	if n == 1 {
		return 0
	}
	p := 2 * (n - 1)
	i %= p
	if i < 0 {
		i += p
	}
	if i >= n {
		i = p - i
	}
	return i
}

// blur1D convolves every plane of data ([planes, h, w]) along x (horizontal) or y
// with kernel k, reflect-padded by (len(k)−1)/2 in front, like diffusers' _filter2d.
func blur1D(data []float32, planes, h, w int, k []float32, horizontal bool) []float32 {
	out := make([]float32, len(data))
	front := (len(k) - 1) / 2
	for p := 0; p < planes; p++ {
		in, o := data[p*h*w:(p+1)*h*w], out[p*h*w:(p+1)*h*w]
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				var s float32
				for j, kj := range k {
					if horizontal {
						s += float32(in[y*w+reflect(x+j-front, w)] * kj)
					} else {
						s += float32(in[reflect(y+j-front, h)*w+x] * kj)
					}
				}
				o[y*w+x] = s
			}
		}
	}
	return out
}

// cubicWeights returns PyTorch's get_cubic_upsample_coefficients(t) in float32.
func cubicWeights(t float32) [4]float32 {
	const a = bicubicA
	x1 := t
	x2 := 1 - t
	c := func(x float32) float32 { // |x| in [1, 2]
		return ((a*x-5*a)*x+8*a)*x - 4*a
	}
	n := func(x float32) float32 { // |x| in [0, 1]
		return ((a+2)*x-(a+3))*x*x + 1
	}
	return [4]float32{c(x1 + 1), n(x1), n(x2), c(x2 + 1)}
}

// alignCornersIndex returns the source index and fraction of output index o for an
// align_corners=True resize from in to out samples, in float32 like torch.
func alignCornersIndex(in, out, o int) (int, float32) {
	if out <= 1 {
		return 0, 0
	}
	scale := float32(in-1) / float32(out-1)
	real := scale * float32(o)
	i := int(math.Floor(float64(real)))
	return i, real - float32(i)
}

// bicubicAlignCorners resizes planes [planes, h, w] to [planes, oh, ow] like
// torch.nn.functional.interpolate(mode="bicubic", align_corners=True): 4×4 taps with
// clamped indices, interpolated along x first, then y.
func bicubicAlignCorners(data []float32, planes, h, w, oh, ow int) []float32 {
	out := make([]float32, planes*oh*ow)
	xi := make([]int, ow)
	xw := make([][4]float32, ow)
	for x := range ow {
		i, t := alignCornersIndex(w, ow, x)
		xi[x], xw[x] = i, cubicWeights(t)
	}
	clamp := func(v, n int) int { return min(max(v, 0), n-1) }
	for p := 0; p < planes; p++ {
		in := data[p*h*w : (p+1)*h*w]
		for y := 0; y < oh; y++ {
			iy, ty := alignCornersIndex(h, oh, y)
			wy := cubicWeights(ty)
			for x := 0; x < ow; x++ {
				var rows [4]float32
				for r := 0; r < 4; r++ {
					row := in[clamp(iy-1+r, h)*w:]
					wx := xw[x]
					ix := xi[x]
					rows[r] = float32(float32(float32(row[clamp(ix-1, w)]*wx[0])+float32(row[clamp(ix, w)]*wx[1]))+
						float32(row[clamp(ix+1, w)]*wx[2])) + float32(row[clamp(ix+2, w)]*wx[3])
				}
				out[(p*oh+y)*ow+x] = float32(float32(float32(rows[0]*wy[0])+float32(rows[1]*wy[1]))+
					float32(rows[2]*wy[2])) + float32(rows[3]*wy[3])
			}
		}
	}
	return out
}

// antialiasKernelSize returns diffusers' (σ, kernel size) for resizing in → out samples:
// σ = max((in/out − 1)/2, 0.001), k = int(max(4σ, 3)) made odd.
func antialiasKernelSize(in, out int) (float64, int) {
	f := float64(in) / float64(out)
	sigma := math.Max((f-1)/2, 0.001)
	k := int(math.Max(2.0*2*sigma, 3))
	if k%2 == 0 {
		k++
	}
	return sigma, k
}

// ResizeWithAntialiasing is diffusers' SVD _resize_with_antialiasing for a [N, C, H, W]
// tensor: a separable Gaussian blur (x then y, reflect padding) whose σ grows with the
// downscale factor, then bicubic (a=−0.75) align_corners=True resampling to outH×outW.
//
// The blur is computed only where the resampling reads it (the 4×4 taps of every output
// sample), each value exactly as the whole blur computes it, so the cost is bounded by the
// pixels read and written whatever the aspect ratio: a kernel as wide as the downscale
// factor runs over at most 4·outW columns (and 4·outH rows), O(H·W) in all, where blurring
// every column of a 1048576×1 image would cost H·W·W/outW.
func ResizeWithAntialiasing(t *tensor.Dense, outH, outW int) (*tensor.Dense, error) {
	if len(t.Shape) != 4 || outH < 1 || outW < 1 {
		return nil, fmt.Errorf("video: resize with antialiasing: need [N,C,H,W] and a positive size, got %v -> %dx%d", t.Shape, outW, outH)
	}
	planes, h, w := t.Shape[0]*t.Shape[1], t.Shape[2], t.Shape[3]
	if h < 1 || w < 1 {
		return nil, fmt.Errorf("video: resize with antialiasing: empty input %v", t.Shape)
	}
	sy, ky := antialiasKernelSize(h, outH)
	sx, kx := antialiasKernelSize(w, outW)
	gx, gy := gaussianKernel(kx, float32(sx)), gaussianKernel(ky, float32(sy))
	// The columns and rows the bicubic taps read, and the rows the vertical blur reads
	// for them.
	cols := tapIndices(w, outW)
	rows := tapIndices(h, outH)
	front := (len(gy) - 1) / 2
	rowsRead := make([]bool, h)
	for _, y := range rows {
		for j := range gy {
			rowsRead[reflect(y+j-front, h)] = true
		}
	}
	// Blurred values are stored only at the columns read (index by position in cols).
	colAt := make([]int, w)
	for i := range colAt {
		colAt[i] = -1
	}
	for i, x := range cols {
		colAt[x] = i
	}
	nc := len(cols)
	hb := make([]float32, planes*h*nc) // the horizontal blur at (row, read column)
	vb := make([]float32, planes*h*w)  // the whole blur where the resample reads it, zero elsewhere
	fx := (len(gx) - 1) / 2
	for p := 0; p < planes; p++ {
		in := t.Data[p*h*w : (p+1)*h*w]
		for y := 0; y < h; y++ {
			if !rowsRead[y] {
				continue
			}
			for i, x := range cols {
				var s float32
				for j, kj := range gx {
					s += float32(in[y*w+reflect(x+j-fx, w)] * kj)
				}
				hb[(p*h+y)*nc+i] = s
			}
		}
		for _, y := range rows {
			for _, x := range cols {
				var s float32
				for j, kj := range gy {
					s += float32(hb[(p*h+reflect(y+j-front, h))*nc+colAt[x]] * kj)
				}
				vb[(p*h+y)*w+x] = s
			}
		}
	}
	return tensor.FromData(bicubicAlignCorners(vb, planes, h, w, outH, outW), t.Shape[0], t.Shape[1], outH, outW)
}

// tapIndices lists, ascending and once each, the input indices an align_corners=True
// bicubic resize from in to out samples reads (bicubicAlignCorners' clamped 4 taps).
func tapIndices(in, out int) []int {
	seen := make([]bool, in)
	var idx []int
	for o := range out {
		i, _ := alignCornersIndex(in, out, o)
		for d := -1; d <= 2; d++ {
			k := min(max(i+d, 0), in-1)
			if !seen[k] {
				seen[k] = true
				idx = append(idx, k)
			}
		}
	}
	slices.Sort(idx)
	return idx
}
