package video

import (
	"fmt"
	"image"
	"math"

	"github.com/vdpp/vdpp/tensor"
)

// FramesFromTensor converts decoded frames [T, 3, H, W] (or [B, T, 3, H, W], frames of
// all videos in order) with values in [0, 1] into opaque images, rounding like diffusers'
// numpy_to_pil: clamp to [0, 1], then round(x·255) half to even in float32.
func FramesFromTensor(frames *tensor.Dense) ([]*image.NRGBA, error) {
	s := frames.Shape
	if len(s) == 5 {
		s = []int{s[0] * s[1], s[2], s[3], s[4]}
	}
	if len(s) != 4 || s[1] != 3 {
		return nil, fmt.Errorf("video: frames tensor must be [T,3,H,W] or [B,T,3,H,W], got %v", frames.Shape)
	}
	if tensor.NumElements(s) != len(frames.Data) {
		return nil, fmt.Errorf("video: frames tensor %v has %d elements", frames.Shape, len(frames.Data))
	}
	t, h, w := s[0], s[2], s[3]
	plane := h * w
	out := make([]*image.NRGBA, t)
	for f := range out {
		img := image.NewNRGBA(image.Rect(0, 0, w, h))
		base := frames.Data[f*3*plane:]
		for i := 0; i < plane; i++ {
			for c := 0; c < 3; c++ {
				img.Pix[4*i+c] = to8(base[c*plane+i])
			}
			img.Pix[4*i+3] = 255
		}
		out[f] = img
	}
	return out, nil
}

// to8 is numpy's (clip(x,0,1)·255).round().astype(uint8) for one float32 (NaN → 0).
func to8(v float32) uint8 {
	if !(v > 0) {
		return 0
	}
	if v > 1 {
		v = 1
	}
	return uint8(math.RoundToEven(float64(v * 255)))
}

// FrameStats summarises a tensor's values (population standard deviation).
type FrameStats struct {
	Min  float64 `json:"min"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
	Std  float64 `json:"std"`
}

// Stats returns the minimum, maximum, mean and standard deviation of all elements of
// frames, accumulated in float64. An empty tensor gives zeros; NaNs propagate.
func Stats(frames *tensor.Dense) FrameStats {
	if len(frames.Data) == 0 {
		return FrameStats{}
	}
	st := FrameStats{Min: math.Inf(1), Max: math.Inf(-1)}
	var sum float64
	for _, v := range frames.Data {
		x := float64(v)
		st.Min = math.Min(st.Min, x)
		st.Max = math.Max(st.Max, x)
		sum += x
	}
	n := float64(len(frames.Data))
	st.Mean = sum / n
	var ss float64
	for _, v := range frames.Data {
		d := float64(v) - st.Mean
		ss += d * d
	}
	st.Std = math.Sqrt(ss / n)
	return st
}

// StatsAccumulator computes FrameStats over values added in pieces (a video decoded a
// chunk at a time), without holding them: the mean is the same float64 sum as Stats's, the
// standard deviation comes from sums of squares about the first value (equal to Stats's to
// about 1e-12 relative, not bit for bit).
type StatsAccumulator struct {
	n              int
	shift          float64
	sum, dev, dev2 float64
	min, max       float64
}

// Add accumulates data.
func (a *StatsAccumulator) Add(data []float32) {
	if len(data) == 0 {
		return
	}
	if a.n == 0 {
		a.shift, a.min, a.max = float64(data[0]), math.Inf(1), math.Inf(-1)
	}
	for _, v := range data {
		x := float64(v)
		a.min = math.Min(a.min, x)
		a.max = math.Max(a.max, x)
		a.sum += x
		d := x - a.shift
		a.dev += d
		a.dev2 += d * d
	}
	a.n += len(data)
}

// Stats returns the summary of everything added (zeros when nothing was).
func (a *StatsAccumulator) Stats() FrameStats {
	if a.n == 0 {
		return FrameStats{}
	}
	n := float64(a.n)
	md := a.dev / n
	return FrameStats{Min: a.min, Max: a.max, Mean: a.sum / n, Std: math.Sqrt(max(a.dev2/n-md*md, 0))}
}
