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
	// Guidance, when set, holds the per-frame guidance weights of one window (Size of
	// them) that every window of a guided item uses (each window guided as a whole clip:
	// SVD's weights rising from its first frame); nil gives a window its frames' share of
	// the item's weights (constant weights, as Wan's).
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

// stepWindows runs the model call of step it.Step window by window, blends the windows'
// guided model outputs with the windows' weights and runs the scheduler's update once on the
// whole latent. The update is elementwise over the latent with scalars that depend on the
// step only (every shipped scheduler: Euler, UniPC), so blending the outputs is blending the
// windows' own next latents, and a multistep solver keeps one state for the whole latent.
func (s *Stepper) stepWindows(ctx context.Context, it *Item, w *Windows) error {
	if s.CFG != nil || s.CP != nil {
		return fmt.Errorf("%w: temporal windows do not combine with cfg or context parallelism", ErrWindows)
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
	for i, a := range starts {
		sub := &Item{Group: it.Group, Samples: it.Samples, Step: it.Step, Cond: it.Cond, Cache: it.Cache,
			Guidance: w.guidanceOf(it.Guidance, frames, a), Latent: sliceFrames(x, a, a+w.Size), firstFrame: a}
		v, err := s.guidedOutput(ctx, sub, i)
		if err != nil {
			return fmt.Errorf("window %d (frames %d..%d): %w", i, a, a+w.Size-1, err)
		}
		wt := w.Weights(i > 0, i < len(starts)-1)
		for f := 0; f < w.Size; f++ {
			wsum[a+f] += wt[f]
			for r := 0; r < rows; r++ {
				src := v[(r*w.Size+f)*per : (r*w.Size+f+1)*per]
				dst := acc[(r*frames+a+f)*per : (r*frames+a+f+1)*per]
				for j, e := range src {
					dst[j] += wt[f] * e
				}
			}
		}
	}
	for r := 0; r < rows; r++ {
		for f := 0; f < frames; f++ {
			v := acc[(r*frames+f)*per : (r*frames+f+1)*per]
			for j := range v {
				v[j] /= wsum[f]
			}
		}
	}
	return s.update(it, acc)
}

// guidanceOf returns the guidance weights of the window starting at frame a of an item of
// frames frames whose weights are g: nil for an unguided item, the window's own Guidance
// when set (every window guided as a whole clip), else the window's frames of each row of g
// (g holds one or more rows of frames weights, as an item does).
func (w *Windows) guidanceOf(g []float32, frames, a int) []float32 {
	if g == nil {
		return nil
	}
	if w.Guidance != nil {
		return w.Guidance
	}
	if frames == 0 || len(g)%frames != 0 {
		return g // the step reports the mismatch
	}
	out := make([]float32, 0, len(g)/frames*w.Size)
	for r := 0; r < len(g)/frames; r++ {
		out = append(out, g[r*frames+a:r*frames+a+w.Size]...)
	}
	return out
}
