package video

import (
	"errors"
	"fmt"
	"image"
	"image/gif"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
)

// ErrNoFrames is returned by the writers when given no frames.
var ErrNoFrames = errors.New("video: no frames to write")

// gifDelay converts frames per second into a GIF delay in 1/100 s (at least 2, since
// most viewers replace smaller delays with 10).
func gifDelay(fps float64) int {
	if !(fps > 0) {
		return 10
	}
	return max(int(math.Round(100/fps)), 2)
}

// WriteGIF encodes frames as a looping animated GIF with one global 256-colour
// median-cut palette (shared by all frames, so colours do not flicker) and
// Floyd–Steinberg dithering; each frame is shown for 1/fps seconds (rounded to 1/100 s).
func WriteGIF(w io.Writer, frames []image.Image, fps float64) error {
	if len(frames) == 0 {
		return ErrNoFrames
	}
	pal := medianCutPalette(frames, 256)
	inv := newInverseMap(pal)
	g := &gif.GIF{LoopCount: 0}
	for _, f := range frames {
		g.Image = append(g.Image, ditherFloydSteinberg(f, inv))
		g.Delay = append(g.Delay, gifDelay(fps))
	}
	if err := gif.EncodeAll(w, g); err != nil {
		return fmt.Errorf("video: encode gif: %w", err)
	}
	return nil
}

// WriteGIFFile writes frames as an animated GIF file (see WriteGIF) atomically.
func WriteGIFFile(path string, frames []image.Image, fps float64) error {
	return writeFileAtomic(path, func(w io.Writer) error { return WriteGIF(w, frames, fps) })
}

// WritePNGFrames writes each frame as dir/000.png, dir/001.png, ... (more digits when
// there are over 1000 frames), creating dir if needed. Each file is written atomically;
// on an error the files already written by this call are removed.
func WritePNGFrames(dir string, frames []image.Image) (err error) {
	if len(frames) == 0 {
		return ErrNoFrames
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("video: png frames: %w", err)
	}
	digits := max(3, len(fmt.Sprint(len(frames)-1)))
	var written []string
	defer func() {
		if err != nil {
			for _, p := range written {
				os.Remove(p)
			}
		}
	}()
	for i, f := range frames {
		p := filepath.Join(dir, fmt.Sprintf("%0*d.png", digits, i))
		if err := writeFileAtomic(p, func(w io.Writer) error {
			if err := png.Encode(w, f); err != nil {
				return fmt.Errorf("video: encode %s: %w", p, err)
			}
			return nil
		}); err != nil {
			return err
		}
		written = append(written, p)
	}
	return nil
}
