package video

import (
	"fmt"
	"image"
	"math"

	"github.com/vdpp/vdpp/tensor"
)

// CLIPProcessing is a transformers CLIPImageProcessor's settings (an image processor's
// preprocessor_config.json): what CLIPProcess does to an image.
type CLIPProcessing struct {
	DoResize bool
	// ShortestEdge, when > 0, resizes the shorter side to it keeping the aspect ratio (the
	// longer side becomes int(ShortestEdge·long/short)); otherwise the image is resized to
	// Height × Width.
	ShortestEdge, Height, Width int
	// Resample is the PIL filter id (PILLanczos, PILBilinear or PILBicubic).
	Resample              int
	DoCenterCrop          bool
	CropHeight, CropWidth int
	DoRescale             bool
	RescaleFactor         float64
	DoNormalize           bool
	Mean, Std             []float64 // one per channel
}

// CLIPProcess is CLIPImageProcessor.preprocess on one image, as transformers runs it: the
// image as RGB8; the resize by PIL (8-bit fixed point, Image.resize with Resample); the
// center crop (zero-padded where the image is smaller than the crop); the rescale
// (float64 v·RescaleFactor, stored as float32); the normalisation ((x − mean)/std in
// float32). The result is pixel values [1, 3, H, W] (channels first).
func CLIPProcess(img image.Image, p CLIPProcessing) (*tensor.Dense, error) {
	pix, w, h := rgb8(img)
	if w < 1 || h < 1 {
		return nil, fmt.Errorf("video: clip processing: empty image %dx%d", w, h)
	}
	if p.DoResize {
		oh, ow := p.Height, p.Width
		if p.ShortestEdge > 0 {
			short, long := min(w, h), max(w, h)
			newLong := int(float64(p.ShortestEdge) * float64(long) / float64(short))
			if w <= h {
				ow, oh = p.ShortestEdge, newLong
			} else {
				ow, oh = newLong, p.ShortestEdge
			}
		}
		if ow < 1 || oh < 1 {
			return nil, fmt.Errorf("video: clip processing: cannot resize %dx%d to %dx%d", w, h, ow, oh)
		}
		f, ok := pilFilterByID(p.Resample)
		if !ok {
			return nil, fmt.Errorf("video: clip processing: resample %d is not a supported PIL filter (1 lanczos, 2 bilinear, 3 bicubic)", p.Resample)
		}
		pix = resizeRGB8(pix, w, h, ow, oh, f)
		w, h = ow, oh
	}
	if p.DoCenterCrop {
		if p.CropHeight < 1 || p.CropWidth < 1 {
			return nil, fmt.Errorf("video: clip processing: crop %dx%d", p.CropWidth, p.CropHeight)
		}
		pix, w, h = centerCropRGB8(pix, w, h, p.CropWidth, p.CropHeight)
	}
	if p.DoNormalize && (len(p.Mean) != 3 || len(p.Std) != 3) {
		return nil, fmt.Errorf("video: clip processing: %d means and %d stds for 3 channels", len(p.Mean), len(p.Std))
	}
	out := tensor.New(1, 3, h, w)
	plane := w * h
	for c := range 3 {
		var mean, std float32
		if p.DoNormalize {
			mean, std = float32(p.Mean[c]), float32(p.Std[c])
		}
		dst := out.Data[c*plane : (c+1)*plane]
		for i := range plane {
			v := float32(pix[3*i+c])
			if p.DoRescale {
				v = float32(float64(pix[3*i+c]) * p.RescaleFactor)
			}
			if p.DoNormalize {
				v = (v - mean) / std
			}
			dst[i] = v
		}
	}
	return out, nil
}

// centerCropRGB8 is transformers' center_crop: top = ⌊(h − ch)/2⌋, left likewise; where the
// image is smaller than the crop it is first placed, zero-padded, in a max(h, ch) ×
// max(w, cw) canvas at offsets ⌈(new − old)/2⌉.
func centerCropRGB8(pix []uint8, w, h, cw, ch int) ([]uint8, int, int) {
	top, left := floorDiv(h-ch, 2), floorDiv(w-cw, 2)
	if top >= 0 && left >= 0 && top+ch <= h && left+cw <= w {
		out := make([]uint8, 0, cw*ch*3)
		for y := top; y < top+ch; y++ {
			out = append(out, pix[(y*w+left)*3:(y*w+left+cw)*3]...)
		}
		return out, cw, ch
	}
	nh, nw := max(ch, h), max(cw, w)
	topPad := int(math.Ceil(float64(nh-h) / 2))
	leftPad := int(math.Ceil(float64(nw-w) / 2))
	canvas := make([]uint8, nw*nh*3)
	for y := range h {
		copy(canvas[((y+topPad)*nw+leftPad)*3:], pix[y*w*3:(y+1)*w*3])
	}
	top += topPad
	left += leftPad
	y0, y1 := max(0, top), min(nh, top+ch)
	x0, x1 := max(0, left), min(nw, left+cw)
	out := make([]uint8, 0, (x1-x0)*(y1-y0)*3)
	for y := y0; y < y1; y++ {
		out = append(out, canvas[(y*nw+x0)*3:(y*nw+x1)*3]...)
	}
	return out, x1 - x0, y1 - y0
}

// floorDiv is Python's a // b for b > 0.
func floorDiv(a, b int) int {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}
