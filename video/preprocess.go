package video

import (
	"errors"
	"fmt"
	"image"

	"github.com/vdpp/vdpp/tensor"
)

// CLIPMean and CLIPStd are the OpenAI CLIP normalisation constants of SVD's
// feature_extractor/preprocessor_config.json.
var (
	CLIPMean = [3]float32{0.48145466, 0.4578275, 0.40821073}
	CLIPStd  = [3]float32{0.26862954, 0.26130258, 0.27577711}
)

// planes01 returns the RGB8 pixels as float32 NCHW planes [3, h, w] of v/255 (numpy's
// float32 division, as diffusers' pil_to_numpy does).
func planes01(pix []uint8, w, h int) []float32 {
	out := make([]float32, 3*w*h)
	for i := 0; i < w*h; i++ {
		for c := 0; c < 3; c++ {
			out[c*w*h+i] = float32(pix[3*i+c]) / 255
		}
	}
	return out
}

// MaxAspectSkew bounds how much an input image's aspect ratio may differ from the video's
// (either way): preparing it stretches one axis that many times more than the other. An
// image beyond it cannot be used (CheckAspect), and within it every resize costs a small
// multiple of the pixels read and written.
const MaxAspectSkew = 16

// ErrAspect marks an input image whose aspect ratio the video cannot use.
var ErrAspect = errors.New("video: aspect ratio")

// CheckAspect refuses (ErrAspect) an image of w x h for a video of vw x vh whose aspect
// ratio differs from the video's by more than MaxAspectSkew times, in one line saying so.
func CheckAspect(w, h, vw, vh int) error {
	if w < 1 || h < 1 || vw < 1 || vh < 1 {
		return fmt.Errorf("%w: %dx%d for a %dx%d video", ErrAspect, w, h, vw, vh)
	}
	// (w/h) / (vw/vh) = w·vh / (h·vw), compared without rounding.
	a, b := int64(w)*int64(vh), int64(h)*int64(vw)
	if a > MaxAspectSkew*b || b > MaxAspectSkew*a {
		return fmt.Errorf("%w: the image is %dx%d, more than %d times wider or taller than the %dx%d video: crop it closer to the video's shape",
			ErrAspect, w, h, MaxAspectSkew, vw, vh)
	}
	return nil
}

// VAEInput is the SVD pipeline's video_processor.preprocess(image, height, width): a
// plain PIL LANCZOS resize to exactly width×height (no resampling when the image already
// has that size), then v/255·2−1, as a [1, 3, height, width] tensor in [−1, 1].
func VAEInput(img image.Image, width, height int) (*tensor.Dense, error) {
	pix, w, h := rgb8(img)
	if w < 1 || h < 1 || width < 1 || height < 1 {
		return nil, fmt.Errorf("video: vae input: cannot resize %dx%d to %dx%d", w, h, width, height)
	}
	pix = resizeLanczosRGB8(pix, w, h, width, height)
	data := planes01(pix, width, height)
	for i, v := range data {
		data[i] = 2*v - 1
	}
	return &tensor.Dense{Shape: []int{1, 3, height, width}, Data: data}, nil
}

// CLIPInput is the SVD pipeline's _encode_image preprocessing from the original image:
// v/255 → x·2−1 → ResizeWithAntialiasing to size×size → (x+1)/2 → (x−mean_c)/std_c, all
// in float32, as a [1, 3, size, size] tensor (CLIPImageProcessor with resize, crop and
// rescale disabled).
func CLIPInput(img image.Image, size int, mean, std [3]float32) (*tensor.Dense, error) {
	pix, w, h := rgb8(img)
	if w < 1 || h < 1 || size < 1 {
		return nil, fmt.Errorf("video: clip input: cannot resize %dx%d to %dx%d", w, h, size, size)
	}
	data := planes01(pix, w, h)
	for i, v := range data {
		data[i] = v*2 - 1
	}
	out, err := ResizeWithAntialiasing(&tensor.Dense{Shape: []int{1, 3, h, w}, Data: data}, size, size)
	if err != nil {
		return nil, fmt.Errorf("video: clip input: %w", err)
	}
	plane := size * size
	for c := 0; c < 3; c++ {
		p := out.Data[c*plane : (c+1)*plane]
		for i, v := range p {
			p[i] = ((v+1)/2 - mean[c]) / std[c]
		}
	}
	return out, nil
}
