package plan

import (
	"fmt"

	"github.com/vdpp/vdpp/internal/cli"
	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/model/family"
)

// ErrOptions marks options `vdpp plan` (and a workload's shape) refuses before anything is
// measured; it is a command-line mistake (cli.ErrUsage).
var ErrOptions = fmt.Errorf("plan: bad options: %w", cli.ErrUsage)

// badOptions is an error about the options, ErrOptions, whose message is fmt.Errorf's.
func badOptions(format string, a ...any) error { return cli.Errorf(ErrOptions, format, a...) }

// Shape is the size of a workload's sample: its denoising steps, its video and its latent
// [T, C, H, W].
type Shape struct {
	Steps                    int
	NumFrames, Height, Width int // the video's
	LatentFrames             int
	LatentChannels           int
	LatentHeight             int
	LatentWidth              int
}

// Latent is the per-sample latent [T, C, H, W].
func (s Shape) Latent() []int {
	return []int{s.LatentFrames, s.LatentChannels, s.LatentHeight, s.LatentWidth}
}

// ResolveShape fills what s leaves to the model m (0) through its family: the steps, and
// the latent of the video's frames and size (the model's where not given). Latent
// dimensions given are taken as they are (the deprecated latent flags, or a worker's
// resolved options); the video's must be sizes the model takes (ErrOptions). sim
// configures a simulator (its latent channels among others).
func ResolveShape(m family.Resolved, sim model.Config, s Shape) (Shape, error) {
	desc, err := m.Describe()
	if err != nil {
		return s, err
	}
	def := desc.Defaults
	if s.Steps == 0 {
		s.Steps = def.Steps
	}
	if s.LatentFrames > 0 && s.LatentHeight > 0 && s.LatentWidth > 0 && s.LatentChannels > 0 {
		return s, nil // resolved already (a worker), or given as latents
	}
	p := def
	latentGiven := s.LatentFrames > 0 || s.LatentHeight > 0 || s.LatentWidth > 0
	if !latentGiven {
		if s.NumFrames > 0 {
			p.NumFrames = s.NumFrames
		}
		switch {
		case s.Height > 0 && s.Width > 0:
			p.Height, p.Width = s.Height, s.Width
		case s.Height > 0 || s.Width > 0:
			return s, badOptions("--height %d --width %d: set both (or neither, for the model's %dx%d)", s.Height, s.Width, def.Width, def.Height)
		}
		f := max(1, desc.SizeMultiple)
		if p.Height%f != 0 || p.Width%f != 0 || p.Height < f || p.Width < f {
			return s, badOptions("--width %d --height %d: both must be positive multiples of %d (the VAE's factor)", p.Width, p.Height, f)
		}
		if fm := desc.FrameMultiple; p.NumFrames < 1 || (fm > 0 && (p.NumFrames-1)%fm != 0) {
			return s, badOptions("--num-frames %d: the model takes 1 + %dk frames", p.NumFrames, fm)
		}
	}
	smp, err := m.Open(family.Options{Sim: sim})
	if err != nil {
		return s, err
	}
	defer smp.Close()
	shape := smp.LatentShape(p)
	if len(shape) != 4 {
		return s, fmt.Errorf("plan: %s: latent shape %v is not [T, C, H, W]", smp.Family(), shape)
	}
	if s.LatentChannels == 0 {
		s.LatentChannels = shape[1]
	}
	if !latentGiven {
		s.NumFrames, s.Height, s.Width = p.NumFrames, p.Height, p.Width
		s.LatentFrames, s.LatentHeight, s.LatentWidth = shape[0], shape[2], shape[3]
	}
	return s, nil
}
