package video

import "math"

// pilPrecisionBits is PIL's fixed-point precision for 8-bit resampling (32 − 8 − 2).
const pilPrecisionBits = 32 - 8 - 2

// lanczosSupport is the support of PIL's LANCZOS filter (a = 3).
const lanczosSupport = 3.0

func sinc(x float64) float64 {
	if x == 0 {
		return 1
	}
	x *= math.Pi
	return math.Sin(x) / x
}

// lanczos is PIL's lanczos_filter: sinc(x)·sinc(x/3) on [−3, 3).
func lanczos(x float64) float64 {
	if -3 <= x && x < 3 {
		return sinc(x) * sinc(x/3)
	}
	return 0
}

// pilFilter is one of PIL's resampling filters: its kernel and support.
type pilFilter struct {
	support float64
	kernel  func(float64) float64
}

// PIL's filters by their Image.Resampling id (Pillow's Resample.c).
var (
	pilLanczos  = pilFilter{lanczosSupport, lanczos}
	pilBilinear = pilFilter{1, func(x float64) float64 {
		x = math.Abs(x)
		if x < 1 {
			return 1 - x
		}
		return 0
	}}
	pilBicubic = pilFilter{2, func(x float64) float64 {
		const a = -0.5
		x = math.Abs(x)
		if x < 1 {
			return ((a+2)*x-(a+3))*x*x + 1
		}
		if x < 2 {
			return (((x-5)*x+8)*x - 4) * a
		}
		return 0
	}}
)

// PIL resampling filter ids (PIL.Image.Resampling), as image processor configs name them.
const (
	PILLanczos  = 1
	PILBilinear = 2
	PILBicubic  = 3
)

// pilFilterByID returns PIL's filter id (1 LANCZOS, 2 BILINEAR, 3 BICUBIC).
func pilFilterByID(id int) (pilFilter, bool) {
	switch id {
	case PILLanczos:
		return pilLanczos, true
	case PILBilinear:
		return pilBilinear, true
	case PILBicubic:
		return pilBicubic, true
	}
	return pilFilter{}, false
}

// pilCoeffs is PIL's precompute_coeffs + normalize_coeffs_8bpc for resampling inSize
// samples to outSize with box [0, inSize): per output sample the first input index,
// the tap count and the fixed-point weights.
type pilCoeffs struct {
	bounds [][2]int // xmin, count
	k      [][]int32
}

func newPILCoeffs(inSize, outSize int, f pilFilter) pilCoeffs {
	scale := float64(float32(inSize)) / float64(outSize)
	filterscale := max(scale, 1.0)
	support := f.support * filterscale
	c := pilCoeffs{bounds: make([][2]int, outSize), k: make([][]int32, outSize)}
	w := make([]float64, int(math.Ceil(support))*2+1)
	for xx := 0; xx < outSize; xx++ {
		center := (float64(xx) + 0.5) * scale
		ss := 1.0 / filterscale
		xmin := max(int(center-support+0.5), 0)
		xmax := min(int(center+support+0.5), inSize) - xmin
		ww := 0.0
		for x := 0; x < xmax; x++ {
			w[x] = f.kernel((float64(x+xmin) - center + 0.5) * ss)
			ww += w[x]
		}
		k := make([]int32, xmax)
		for x := 0; x < xmax; x++ {
			v := w[x]
			if ww != 0 {
				v /= ww
			}
			if v < 0 {
				k[x] = int32(-0.5 + v*(1<<pilPrecisionBits))
			} else {
				k[x] = int32(0.5 + v*(1<<pilPrecisionBits))
			}
		}
		c.bounds[xx] = [2]int{xmin, xmax}
		c.k[xx] = k
	}
	return c
}

func clip8(v int32) uint8 {
	if v >= 1<<pilPrecisionBits<<8 {
		return 255
	}
	if v <= 0 {
		return 0
	}
	return uint8(v >> pilPrecisionBits)
}

// resizeLanczosRGB8 resizes packed RGB8 pixels from w×h to ow×oh like PIL's
// Image.resize(..., Image.LANCZOS) (resizeRGB8).
func resizeLanczosRGB8(pix []uint8, w, h, ow, oh int) []uint8 {
	return resizeRGB8(pix, w, h, ow, oh, pilLanczos)
}

// resizeRGB8 resizes packed RGB8 pixels from w×h to ow×oh like PIL's Image.resize with
// filter f: horizontal pass first (only the rows the vertical pass needs), 8-bit
// intermediate, then the vertical pass; a pass whose size does not change is skipped.
func resizeRGB8(pix []uint8, w, h, ow, oh int, f pilFilter) []uint8 {
	if w == ow && h == oh {
		return append([]uint8(nil), pix...)
	}
	vert := newPILCoeffs(h, oh, f)
	first, last := 0, h
	if oh != h {
		first = vert.bounds[0][0]
		last = vert.bounds[oh-1][0] + vert.bounds[oh-1][1]
	}
	src, sw := pix[first*w*3:last*w*3], w
	if ow != w {
		hc := newPILCoeffs(w, ow, f)
		rows := last - first
		tmp := make([]uint8, rows*ow*3)
		for y := 0; y < rows; y++ {
			in := src[y*w*3:]
			out := tmp[y*ow*3:]
			for xx := 0; xx < ow; xx++ {
				xmin, k := hc.bounds[xx][0], hc.k[xx]
				for ch := 0; ch < 3; ch++ {
					ss := int32(1) << (pilPrecisionBits - 1)
					for x, kx := range k {
						ss += int32(in[(x+xmin)*3+ch]) * kx
					}
					out[xx*3+ch] = clip8(ss)
				}
			}
		}
		src, sw = tmp, ow
	}
	if oh == h {
		return src
	}
	out := make([]uint8, oh*sw*3)
	for yy := 0; yy < oh; yy++ {
		ymin, k := vert.bounds[yy][0]-first, vert.k[yy]
		for i := 0; i < sw*3; i++ {
			ss := int32(1) << (pilPrecisionBits - 1)
			for y, ky := range k {
				ss += int32(src[(y+ymin)*sw*3+i]) * ky
			}
			out[yy*sw*3+i] = clip8(ss)
		}
	}
	return out
}
