package pipeline

import (
	"context"
	"errors"
	"fmt"
	"math"
)

// ErrWindows marks a temporal windowing the frames cannot take.
var ErrWindows = errors.New("pipeline: bad windows")

// Windows makes a step denoise a latent longer than the denoiser's native frame count as
// overlapping temporal windows (MultiDiffusion): at every step each window of Size frames
// runs the step on its own (its own guidance weights, the sample's conditioning), and the
// frames the windows share are averaged with Blend weights that ramp over the Overlap frames
// at a window's inner edges. Memory grows with the latent only, not with the model's input.
type Windows struct {
	Size, Overlap int
	// Blend is "linear" or "cosine": the shape of the ramp over an overlap.
	Blend string
	// Guidance holds the per-frame guidance weights of one window (Size of them) for a
	// guided item; nil for an unguided run.
	Guidance []float32
}

// Validate reports a windowing that cannot cut frames (one line naming the flag values).
func (w Windows) Validate(frames int) error {
	switch {
	case w.Size < 1:
		return fmt.Errorf("%w: window %d frames", ErrWindows, w.Size)
	case w.Overlap < 0 || w.Overlap >= w.Size:
		return fmt.Errorf("%w: overlap %d must be in [0, window %d)", ErrWindows, w.Overlap, w.Size)
	case frames < w.Size:
		return fmt.Errorf("%w: %d frames are fewer than one window of %d", ErrWindows, frames, w.Size)
	case w.Blend != "linear" && w.Blend != "cosine":
		return fmt.Errorf("%w: blend %q (want linear or cosine)", ErrWindows, w.Blend)
	case w.Guidance != nil && len(w.Guidance) != w.Size:
		return fmt.Errorf("%w: %d guidance weights for a window of %d", ErrWindows, len(w.Guidance), w.Size)
	}
	return nil
}

// Starts returns the first frame of every window over frames: a stride of Size-Overlap from
// frame 0, the last window flush with the end (so it may overlap its neighbour by more).
func (w Windows) Starts(frames int) ([]int, error) {
	if err := w.Validate(frames); err != nil {
		return nil, err
	}
	var out []int
	stride := w.Size - w.Overlap
	for a := 0; ; a += stride {
		if a+w.Size >= frames {
			out = append(out, frames-w.Size)
			return out, nil
		}
		out = append(out, a)
	}
}

// Weights returns the blend weight of each of a window's Size frames: 1 inside, a ramp
// rising over the first Overlap frames when the window has a neighbour on the left (left)
// and falling over the last Overlap frames when it has one on the right. Every weight is
// positive, so every frame is covered.
func (w Windows) Weights(left, right bool) []float32 {
	out := make([]float32, w.Size)
	for i := range out {
		out[i] = 1
	}
	ramp := func(i int) float32 { // i in [0, Overlap): rising
		t := float64(i+1) / float64(w.Overlap+1)
		if w.Blend == "cosine" {
			t = 0.5 - 0.5*math.Cos(math.Pi*t)
		}
		return float32(t)
	}
	for i := 0; i < w.Overlap; i++ {
		if left {
			out[i] = min(out[i], ramp(i))
		}
		if right {
			out[w.Size-1-i] = min(out[w.Size-1-i], ramp(i))
		}
	}
	return out
}

// stepWindows runs step it.Step window by window and blends the windows' next latents.
func (s *Stepper) stepWindows(ctx context.Context, it *Item) error {
	w := s.Windows
	if s.CFG != nil || s.CP != nil {
		return fmt.Errorf("%w: temporal windows do not combine with cfg or context parallelism", ErrWindows)
	}
	if !it.SchedState.Empty() {
		return fmt.Errorf("%w: temporal windows need a one-step scheduler (the item carries solver state)", ErrWindows)
	}
	x := it.Latent
	rows, frames := x.Shape[0], x.Shape[1]
	starts, err := w.Starts(frames)
	if err != nil {
		return err
	}
	per := x.Len() / (rows * frames)
	acc := make([]float32, x.Len())
	wsum := make([]float32, frames)
	var guidance []float32
	if it.Guidance != nil {
		if guidance = w.Guidance; guidance == nil {
			return fmt.Errorf("%w: a guided item but no window guidance weights", ErrWindows)
		}
	}
	for i, a := range starts {
		sub := &Item{Group: it.Group, Samples: it.Samples, Step: it.Step, Cond: it.Cond, Guidance: guidance,
			Latent: sliceFrames(x, a, a+w.Size)}
		if err := s.stepOne(ctx, sub); err != nil {
			return fmt.Errorf("window %d (frames %d..%d): %w", i, a, a+w.Size-1, err)
		}
		if !sub.SchedState.Empty() {
			return fmt.Errorf("%w: temporal windows need a one-step scheduler (this one keeps state)", ErrWindows)
		}
		wt := w.Weights(i > 0, i < len(starts)-1)
		for f := 0; f < w.Size; f++ {
			wsum[a+f] += wt[f]
			for r := 0; r < rows; r++ {
				src := sub.Latent.Data[(r*w.Size+f)*per : (r*w.Size+f+1)*per]
				dst := acc[(r*frames+a+f)*per : (r*frames+a+f+1)*per]
				for j, v := range src {
					dst[j] += wt[f] * v
				}
			}
		}
	}
	for r := 0; r < rows; r++ {
		for f := 0; f < frames; f++ {
			dst := x.Data[(r*frames+f)*per : (r*frames+f+1)*per]
			src := acc[(r*frames+f)*per : (r*frames+f+1)*per]
			for j := range dst {
				dst[j] = src[j] / wsum[f]
			}
		}
	}
	return nil
}
