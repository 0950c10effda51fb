package video

import (
	"errors"
	"image"
	"image/color"
	"math"
	"testing"
	"time"

	"github.com/vdpp/vdpp/tensor"
)

// rowImage returns a w×1 (or 1×w when vertical) grey image with the given values.
func rowImage(vals []uint8, vertical bool) *image.NRGBA {
	r := image.Rect(0, 0, len(vals), 1)
	if vertical {
		r = image.Rect(0, 0, 1, len(vals))
	}
	img := image.NewNRGBA(r)
	for i, v := range vals {
		x, y := i, 0
		if vertical {
			x, y = 0, i
		}
		img.SetNRGBA(x, y, color.NRGBA{v, v, v, 255})
	}
	return img
}

func patternImage(w, h int) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.SetNRGBA(x, y, color.NRGBA{uint8(x * 37 % 256), uint8(y * 53 % 256), uint8((x*y + 11) % 256), 255})
		}
	}
	return img
}

func TestLanczosKnownCases(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []uint8
		out  int
		want []uint8
	}{
		// 2→1: two equal taps (support 6 covers both) → rounded mean, half up.
		{"halve", []uint8{10, 21}, 1, []uint8{16}},
		{"halve extremes", []uint8{0, 255}, 1, []uint8{128}},
		// 2→4: taps L(0.25)=0.890067, L(0.75)=0.270190, L(1.25)=−0.132871 (hand-computed):
		// out[1] = 255·L(.75)/(L(.25)+L(.75)) = 59.38, out[0] = 255·L(1.25)/(…) < 0 → 0.
		{"double", []uint8{0, 255}, 4, []uint8{0, 59, 196, 255}},
		{"same size", []uint8{3, 1, 4, 1, 5}, 5, []uint8{3, 1, 4, 1, 5}},
	} {
		for _, vertical := range []bool{false, true} {
			t.Run(tc.name, func(t *testing.T) {
				img := rowImage(tc.in, vertical)
				w, h := tc.out, 1
				if vertical {
					w, h = 1, tc.out
				}
				pix, _, _ := rgb8(img)
				iw, ih := img.Bounds().Dx(), img.Bounds().Dy()
				got := resizeLanczosRGB8(pix, iw, ih, w, h)
				for i, want := range tc.want {
					for c := 0; c < 3; c++ {
						if got[3*i+c] != want {
							t.Fatalf("vertical=%v: out %v, want %v", vertical, got, tc.want)
						}
					}
				}
			})
		}
	}
}

func TestVAEInput(t *testing.T) {
	// Same size: no resampling, exactly v/255·2−1.
	img := patternImage(6, 4)
	x, err := VAEInput(img, 6, 4)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{1, 3, 4, 6}; !equalInts(x.Shape, want) {
		t.Fatalf("shape %v", x.Shape)
	}
	for c := 0; c < 3; c++ {
		for y := 0; y < 4; y++ {
			for xx := 0; xx < 6; xx++ {
				p := img.NRGBAAt(xx, y)
				v := [3]uint8{p.R, p.G, p.B}[c]
				if got, want := x.Data[(c*4+y)*6+xx], 2*(float32(v)/255)-1; got != want {
					t.Fatalf("(%d,%d,%d) = %v, want %v", c, y, xx, got, want)
				}
			}
		}
	}
	// A constant image stays constant through down- and up-scaling.
	for _, sz := range [][4]int{{64, 48, 24, 18}, {10, 6, 33, 17}} {
		src := image.NewNRGBA(image.Rect(0, 0, sz[0], sz[1]))
		for i := 0; i < len(src.Pix); i += 4 {
			copy(src.Pix[i:], []uint8{200, 100, 7, 255})
		}
		x, err := VAEInput(src, sz[2], sz[3])
		if err != nil {
			t.Fatal(err)
		}
		plane := sz[2] * sz[3]
		for c, v := range []float32{200, 100, 7} {
			for _, got := range x.Data[c*plane : (c+1)*plane] {
				if want := 2*(v/255) - 1; got != want {
					t.Fatalf("size %v channel %d: %v, want %v", sz, c, got, want)
				}
			}
		}
	}
	if _, err := VAEInput(img, 0, 3); err == nil {
		t.Error("zero width: no error")
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestAntialiasKernelSize(t *testing.T) {
	for _, tc := range []struct {
		in, out, k int
		sigma      float64
	}{
		{448, 224, 3, 0.5},
		{1024, 224, 7, (1024.0/224 - 1) / 2},
		{576, 224, 3, (576.0/224 - 1) / 2},
		{2000, 224, 15, (2000.0/224 - 1) / 2},
		{32, 224, 3, 0.001},
		{224, 224, 3, 0.001},
		{1120, 224, 9, 2}, // 4σ = 8 is even → 9
	} {
		s, k := antialiasKernelSize(tc.in, tc.out)
		if k != tc.k || math.Abs(s-tc.sigma) > 1e-12 {
			t.Errorf("%d→%d: σ %v k %d, want %v %d", tc.in, tc.out, s, k, tc.sigma, tc.k)
		}
	}
}

func TestGaussianAndReflect(t *testing.T) {
	k := gaussianKernel(3, 0.5)
	// e^-2 = 0.1353353; normalised by 1 + 2e^-2.
	a, b := 0.1353352832/1.2706705664, 1/1.2706705664
	if math.Abs(float64(k[0])-a) > 1e-7 || math.Abs(float64(k[1])-b) > 1e-7 || k[0] != k[2] {
		t.Fatalf("kernel %v, want [%v %v %v]", k, a, b, a)
	}
	// Reflect padding (edge not repeated): [1 0 0] → [b, a, 0] horizontally.
	got := blur1D([]float32{1, 0, 0}, 1, 1, 3, k, true)
	if got[0] != k[1] || got[1] != k[0] || got[2] != 0 {
		t.Errorf("reflect blur %v", got)
	}
	got = blur1D([]float32{1, 0, 0}, 1, 3, 1, k, false)
	if got[0] != k[1] || got[1] != k[0] || got[2] != 0 {
		t.Errorf("vertical reflect blur %v", got)
	}
	for _, tc := range [][3]int{{-1, 3, 1}, {-2, 3, 2}, {3, 3, 1}, {4, 3, 0}, {5, 3, 1}, {0, 1, 0}, {-7, 4, 1}} {
		if got := reflect(tc[0], tc[1]); got != tc[2] {
			t.Errorf("reflect(%d,%d) = %d, want %d", tc[0], tc[1], got, tc[2])
		}
	}
}

func TestBicubicAlignCorners(t *testing.T) {
	// Hand-computed with a = −0.75: t = 0.5 gives weights [−3/32, 19/32, 19/32, −3/32].
	in := []float32{0, 0, 1, 0}
	want := []float32{0, -0.09375, 0, 0.59375, 1, 0.59375, 0}
	got := bicubicAlignCorners(in, 1, 1, 4, 1, 7)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("x: got %v, want %v", got, want)
		}
	}
	got = bicubicAlignCorners(in, 1, 4, 1, 7, 1)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("y: got %v, want %v", got, want)
		}
	}
	// Corners map to corners; same size is the identity.
	img := []float32{1, 2, 3, 4, 5, 6}
	got = bicubicAlignCorners(img, 1, 2, 3, 2, 3)
	for i := range img {
		if got[i] != img[i] {
			t.Fatalf("identity: %v", got)
		}
	}
}

func TestResizeWithAntialiasing(t *testing.T) {
	x := tensor.New(2, 3, 5, 7)
	for i := range x.Data {
		x.Data[i] = float32(math.Sin(float64(i)))
	}
	same, err := ResizeWithAntialiasing(x, 5, 7)
	if err != nil {
		t.Fatal(err)
	}
	if !tensor.BitEqual(same, x) {
		t.Error("same-size resize is not the identity")
	}
	c := tensor.New(1, 1, 40, 30)
	for i := range c.Data {
		c.Data[i] = 0.25
	}
	small, err := ResizeWithAntialiasing(c, 7, 9)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range small.Data {
		if math.Abs(float64(v)-0.25) > 1e-6 {
			t.Fatalf("constant not preserved: %v", v)
		}
	}
	if _, err := ResizeWithAntialiasing(tensor.New(3, 4), 2, 2); err == nil {
		t.Error("rank-2 input: no error")
	}
}

func TestCLIPInput(t *testing.T) {
	src := image.NewNRGBA(image.Rect(0, 0, 50, 30))
	for i := 0; i < len(src.Pix); i += 4 {
		copy(src.Pix[i:], []uint8{255, 128, 0, 255})
	}
	x, err := CLIPInput(src, 16, CLIPMean, CLIPStd)
	if err != nil {
		t.Fatal(err)
	}
	if !equalInts(x.Shape, []int{1, 3, 16, 16}) {
		t.Fatalf("shape %v", x.Shape)
	}
	for c, v := range []float64{1, 128.0 / 255, 0} {
		want := (v - float64(CLIPMean[c])) / float64(CLIPStd[c])
		for _, got := range x.Data[c*256 : (c+1)*256] {
			if math.Abs(float64(got)-want) > 1e-5 {
				t.Fatalf("channel %d: %v, want %v", c, got, want)
			}
		}
	}
	// Upscaling a tiny image: σ = 0.001 makes the blur the identity, so the result is
	// the bicubic interpolation of x·2−1, mapped back by (x+1)/2.
	tiny := rowImage([]uint8{0, 0, 255, 0}, false)
	y, err := CLIPInput(tiny, 7, [3]float32{0, 0, 0}, [3]float32{1, 1, 1})
	if err != nil {
		t.Fatal(err)
	}
	// Rows are all equal (height 1 → 7); columns follow the hand-computed weights.
	want := []float64{0, -0.09375, 0, 0.59375, 1, 0.59375, 0}
	for i, w := range want {
		if got := y.Data[3*7+i]; math.Abs(float64(got)-w) > 1e-6 {
			t.Fatalf("column %d: %v, want %v", i, got, w)
		}
	}
	if _, err := CLIPInput(src, 0, CLIPMean, CLIPStd); err == nil {
		t.Error("size 0: no error")
	}
}

// wholeBlurResize is ResizeWithAntialiasing as diffusers writes it: both blur passes over
// every pixel, then the bicubic resample (the reference the restricted blur must equal).
func wholeBlurResize(t *tensor.Dense, outH, outW int) []float32 {
	planes, h, w := t.Shape[0]*t.Shape[1], t.Shape[2], t.Shape[3]
	sy, ky := antialiasKernelSize(h, outH)
	sx, kx := antialiasKernelSize(w, outW)
	data := blur1D(t.Data, planes, h, w, gaussianKernel(kx, float32(sx)), true)
	data = blur1D(data, planes, h, w, gaussianKernel(ky, float32(sy)), false)
	return bicubicAlignCorners(data, planes, h, w, outH, outW)
}

// Blurring only where the resample reads gives the whole blur's bits, for down- and
// upscales, odd sizes and extreme aspect ratios.
func TestResizeWithAntialiasingMatchesWholeBlur(t *testing.T) {
	for _, c := range []struct{ h, w, oh, ow int }{
		{40, 30, 7, 9}, {224, 224, 224, 224}, {300, 500, 224, 224}, {5, 7, 64, 64}, {1, 2000, 16, 16}, {3000, 1, 8, 8}, {17, 1, 1, 1}, {64, 48, 1, 3},
	} {
		x := tensor.New(1, 3, c.h, c.w)
		for i := range x.Data {
			x.Data[i] = float32(math.Sin(float64(i) * 0.37))
		}
		got, err := ResizeWithAntialiasing(x, c.oh, c.ow)
		if err != nil {
			t.Fatal(err)
		}
		want := wholeBlurResize(x, c.oh, c.ow)
		for i := range want {
			if math.Float32bits(got.Data[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%dx%d -> %dx%d: value %d is %v, the whole blur's %v", c.w, c.h, c.ow, c.oh, i, got.Data[i], want[i])
			}
		}
	}
}

// An image of extreme aspect ratio costs its pixels, not pixels times the downscale factor:
// a 262144x1 image goes through the CLIP and VAE resizes (and a 1x262144 one through the
// CLIP resize) in about the time of a 512x512 image of the same pixels; blurring every
// column with a kernel 2341 taps wide took a thousand times longer (a 1048576x1 upload's,
// 9361 taps, 20 minutes). Times are compared side by side (the best of a few runs each),
// not to a clock budget. (VAEInput is PIL's resize, horizontal pass first, bit for bit: a
// tall image's cost grows with the video's width; CheckAspect refuses such images first.)
func TestExtremeAspectResizeIsBounded(t *testing.T) {
	image1 := func(w, h int) *image.NRGBA {
		img := image.NewNRGBA(image.Rect(0, 0, w, h))
		for i := range img.Pix {
			img.Pix[i] = uint8(i * 7)
		}
		return img
	}
	square, wide, tall := image1(512, 512), image1(1<<18, 1), image1(1, 1<<18)
	cost := func(img *image.NRGBA, vae bool) time.Duration {
		best := time.Duration(1 << 62)
		for range 2 {
			t0 := time.Now()
			if _, err := CLIPInput(img, 224, CLIPMean, CLIPStd); err != nil {
				t.Fatal(err)
			}
			if vae {
				if _, err := VAEInput(img, 64, 64); err != nil {
					t.Fatal(err)
				}
			}
			best = min(best, time.Since(t0))
		}
		return best
	}
	for _, c := range []struct {
		name string
		img  *image.NRGBA
		vae  bool
	}{{"262144x1", wide, true}, {"1x262144", tall, false}} {
		base, got := cost(square, c.vae), cost(c.img, c.vae)
		if got > 10*base+50*time.Millisecond {
			t.Errorf("%s: %v, against %v for 512x512: the resize's cost is not bounded by the pixels", c.name, got, base)
		}
	}
}

func TestCheckAspect(t *testing.T) {
	for _, c := range []struct {
		w, h, vw, vh int
		ok           bool
	}{
		{1024, 576, 1024, 576, true}, {64, 64, 1024, 64, true}, {1024, 64, 64, 64, true}, {1025, 64, 64, 64, false},
		{1 << 20, 1, 64, 64, false}, {1, 1 << 20, 64, 64, false}, {1, 16, 16, 1, false}, {1, 1, 1, 16, true},
	} {
		err := CheckAspect(c.w, c.h, c.vw, c.vh)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrAspect)) {
			t.Errorf("%dx%d for %dx%d: %v, want ok %v", c.w, c.h, c.vw, c.vh, err, c.ok)
		}
	}
}
