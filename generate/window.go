package generate

import (
	"fmt"

	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/sched"
)

// resolveWindows fills the temporal window defaults from the model's native frame count and
// refuses windows the model cannot run: a window longer than native, an overlap that is not
// shorter than the window, a video shorter than a window the user asked for. A video of at
// most native frames with no --window runs as one window, as before.
func resolveWindows(o Options, native int) (Options, error) {
	if o.Blend == "" {
		o.Blend = "cosine"
	}
	if o.Blend != "linear" && o.Blend != "cosine" {
		return o, fmt.Errorf("%w: --blend %q (want linear or cosine)", ErrOptions, o.Blend)
	}
	switch {
	case o.Window < 0:
		return o, fmt.Errorf("%w: --window %d", ErrOptions, o.Window)
	case native > 0 && o.Window > native:
		return o, fmt.Errorf("%w: --window %d is longer than the model's %d frames", ErrOptions, o.Window, native)
	case o.Window > 0 && o.NumFrames < o.Window:
		return o, fmt.Errorf("%w: --num-frames %d is fewer than one --window of %d", ErrOptions, o.NumFrames, o.Window)
	}
	if o.Window == 0 {
		o.Window = native
		if o.Window <= 0 || o.NumFrames < o.Window {
			o.Window = o.NumFrames
		}
	}
	if o.Overlap < 0 {
		o.Overlap = o.Window / 4
	}
	if o.Overlap >= o.Window {
		return o, fmt.Errorf("%w: --overlap %d must be shorter than --window %d", ErrOptions, o.Overlap, o.Window)
	}
	return o, nil
}

// windows is the pipeline's windowing for o, nil when the video fits in one window.
func windows(o Options) *pipeline.Windows {
	if o.Window <= 0 || o.NumFrames <= o.Window {
		return nil
	}
	w := &pipeline.Windows{Size: o.Window, Overlap: o.Overlap, Blend: o.Blend}
	if o.MaxGuidance > 1 {
		// Each window is guided as a whole native clip is: rising from its first frame.
		w.Guidance = sched.GuidanceWeights(float32(o.MinGuidance), float32(o.MaxGuidance), o.Window)
	}
	return w
}
