package video

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/gif"
	"io"
	"math"
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
	return WriteGIFFrames(w, medianCutPalette(frames, 256), len(frames), func(i int) (image.Image, error) { return frames[i], nil }, fps)
}

// WriteGIFFrames writes n frames as WriteGIF does, with the palette pal (a Histogram's
// Palette(256) over all of them gives WriteGIF's bytes), fetching one frame at a time from
// frame(i), in order, so a long video need not be held in memory. All frames must have
// the size of the first.
func WriteGIFFrames(w io.Writer, pal color.Palette, n int, frame func(i int) (image.Image, error), fps float64) error {
	if n <= 0 {
		return ErrNoFrames
	}
	inv := newInverseMap(pal)
	bw := bufio.NewWriter(w)
	var one bytes.Buffer
	var screen image.Rectangle
	for i := 0; i < n; i++ {
		f, err := frame(i)
		if err != nil {
			return fmt.Errorf("video: gif frame %d: %w", i, err)
		}
		pm := ditherFloydSteinberg(f, inv)
		if i == 0 {
			screen = pm.Bounds()
			writeGIFHeader(bw, screen.Dx(), screen.Dy(), n > 1)
		} else if !pm.Bounds().In(screen) {
			return fmt.Errorf("video: gif frame %d is %v, frame 0 is %v", i, pm.Bounds().Size(), screen.Size())
		}
		// A one-frame GIF of the same size is header (13 bytes), the frame's block (it
		// depends only on the frame, its delay and the logical screen size) and the trailer.
		one.Reset()
		if err := gif.EncodeAll(&one, &gif.GIF{Image: []*image.Paletted{pm}, Delay: []int{gifDelay(fps)}}); err != nil {
			return fmt.Errorf("video: encode gif: %w", err)
		}
		b := one.Bytes()
		bw.Write(b[gifHeaderLen : len(b)-1])
	}
	bw.WriteByte(gifTrailer)
	if err := bw.Flush(); err != nil {
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
func WritePNGFrames(dir string, frames []image.Image) error {
	p, err := NewPNGFrames(dir, len(frames))
	if err != nil {
		return err
	}
	for i, f := range frames {
		if err := p.Write(i, f); err != nil {
			p.Remove()
			return err
		}
	}
	return nil
}

// gifHeaderLen is the length of the header image/gif writes without a global colour table
// and without the looping extension: "GIF89a", the logical screen's size, flags 0,
// background 0 and aspect 0.
const gifHeaderLen = 13

const gifTrailer = 0x3b

// writeGIFHeader writes what image/gif's EncodeAll writes before the first frame of a GIF
// of w×h frames with no global colour table and LoopCount 0: the header and, for an
// animation, the NETSCAPE2.0 looping extension.
func writeGIFHeader(w *bufio.Writer, width, height int, animated bool) {
	w.WriteString("GIF89a")
	w.Write([]byte{byte(width), byte(width >> 8), byte(height), byte(height >> 8), 0, 0, 0})
	if animated {
		w.Write([]byte{0x21, 0xff, 0x0b})
		w.WriteString("NETSCAPE2.0")
		w.Write([]byte{0x03, 0x01, 0, 0, 0x00}) // loop forever
	}
}
