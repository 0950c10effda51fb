package family

import (
	"github.com/vdpp/vdpp/pipeline"
)

// Windowing is a family's default temporal windowing of a video longer than its native
// length (Description.Windowing), in video frames; zero fields take the engine's defaults
// (see Description.ResolveWindows).
type Windowing struct {
	Window  int    // frames per window (0: the native length, Defaults.NumFrames)
	Overlap int    // frames neighbouring windows share (0: a quarter of the window)
	Blend   string // "linear" or "cosine" ("": cosine)
}

// WindowGuider is implemented by Samplers whose guidance weights depend on the clip's
// length (SVD's, rising from the first frame to the last): WindowGuidance returns the
// per-frame weights of one window of frames latent frames, so every window is guided as a
// whole clip is; nil when p is unguided. A Sampler without it guides a window with its
// frames' share of the item's weights (constant weights, as Wan's).
type WindowGuider interface {
	WindowGuidance(p Params, frames int) []float32
}

// timeFactor is the VAE's temporal compression: latent frames = 1 + (frames-1)/T for T > 1.
func (d Description) timeFactor() int { return max(d.FrameMultiple, 1) }

// LatentFrames is the number of latent frames of a video of frames frames: frames itself,
// or 1 + (frames-1)/FrameMultiple for a causal VAE that compresses time (Wan's first
// latent frame holds the first video frame alone, every later one FrameMultiple frames).
func (d Description) LatentFrames(frames int) int {
	if t := d.timeFactor(); t > 1 {
		return 1 + (frames-1)/t
	}
	return frames
}

// ResolveWindows returns p with its temporal windowing filled in and checked, in video
// frames. Window 0 takes the family's window (Windowing.Window, else the native length
// Defaults.NumFrames), or the whole video when it is shorter; Overlap < 0 takes the family's
// overlap, else a quarter of the window (whole latent frames, at least one); Blend "" takes the
// family's, else cosine. With a VAE that compresses time by T = FrameMultiple, windows are
// cut in latent frames: a window must be 1 + T·k frames (1 + k latent frames) and an overlap
// a multiple of T. Bad values (an overlap not shorter than the window, a window longer than
// the model's native length, a video shorter than the window asked for, a window or
// overlap that does not map to whole latent frames, an unknown blend) are one *knob.Error
// each, naming the knobs (rendered in the caller's spelling).
func (d Description) ResolveWindows(p Params) (Params, error) {
	bad := func(name, format string, args ...any) (Params, error) {
		return p, d.Knobs.Errorf(name, format, args...)
	}
	native, t := d.Defaults.NumFrames, d.timeFactor()
	if d.Windowing.Window > 0 {
		native = min(native, d.Windowing.Window)
	}
	if p.Blend == "" {
		p.Blend = d.Windowing.Blend
	}
	if p.Blend == "" {
		p.Blend = "cosine"
	}
	switch {
	case p.Blend != "linear" && p.Blend != "cosine":
		return bad("blend", "{blend} %q (want linear or cosine)", p.Blend)
	case p.Window < 0:
		return bad("window", "{window} %d must not be negative", p.Window)
	case d.Defaults.NumFrames > 0 && p.Window > d.Defaults.NumFrames:
		return bad("window", "{window} %d is longer than the model's %d frames", p.Window, d.Defaults.NumFrames)
	case p.Window > 0 && p.NumFrames < p.Window:
		return bad("window", "{num_frames} %d is fewer than one {window} of %d", p.NumFrames, p.Window)
	case t > 1 && p.Window > 0 && (p.Window-1)%t != 0:
		return bad("window", "{window} %d: the model's causal VAE compresses time by %d, so a window takes 1 + %dk frames (e.g. %d or %d)",
			p.Window, t, t, max(1, (p.Window-1)/t*t+1), ((p.Window-1)/t+1)*t+1)
	case t > 1 && p.Overlap > 0 && p.Overlap%t != 0:
		return bad("overlap", "{overlap} %d: the model's causal VAE compresses time by %d, so an overlap is a multiple of %d frames (e.g. %d or %d)",
			p.Overlap, t, t, p.Overlap/t*t, (p.Overlap/t+1)*t)
	}
	if p.Window == 0 {
		p.Window = native
		if p.Window <= 0 || p.NumFrames < p.Window {
			p.Window = p.NumFrames
		}
	}
	if p.Overlap < 0 {
		p.Overlap = d.Windowing.Overlap
		if p.Overlap <= 0 || p.Overlap >= p.Window {
			lw := d.LatentFrames(p.Window)
			p.Overlap = max(lw/4, min(lw-1, 1)) * t
		}
	}
	if p.Overlap >= p.Window {
		return bad("overlap", "{overlap} %d must be shorter than {window} %d", p.Overlap, p.Window)
	}
	return p, nil
}

// StepParams are the parameters of one denoiser call of a generation with p: a long video
// (Window < NumFrames) is stepped one window at a time, so its NumFrames is the window's;
// anything else is p. Memory estimates of a step (ActivationEstimator) use it, so a long
// video's step costs one window's, flat in its length; what holds the whole video (the
// latent, the decode) takes p.
func (p Params) StepParams() Params {
	if p.Window > 0 && p.NumFrames > p.Window {
		p.NumFrames = p.Window
	}
	return p
}

// Windows returns the engine's windowing of p (resolved by ResolveWindows) in latent frames,
// with the window guidance of s when it is a WindowGuider; nil when the video is one
// window.
func (d Description) Windows(p Params, s Sampler) *pipeline.Windows {
	if p.Window <= 0 || p.NumFrames <= p.Window {
		return nil
	}
	w := &pipeline.Windows{Size: d.LatentFrames(p.Window), Overlap: p.Overlap / d.timeFactor(), Blend: p.Blend}
	if g, ok := s.(WindowGuider); ok {
		w.Guidance = g.WindowGuidance(p, w.Size)
	}
	return w
}
