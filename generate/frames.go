package generate

import (
	"errors"
	"fmt"
	"image"
	"io"
	"math"
	"path/filepath"
	"runtime"

	"github.com/vdpp/vdpp/internal/atomicfile"
	"github.com/vdpp/vdpp/tensor"
	"github.com/vdpp/vdpp/video"
)

// sampleWriter writes one sample's video as its frames are decoded, a chunk at a time, so
// memory does not grow with the frame count: each frame goes to its PNG file, into the
// GIF palette's histogram and into ffmpeg's input at once; the GIF is written at the end
// from the PNG files read back one at a time (its palette needs every frame first). The
// files are the bytes the all-frames-at-once writers give.
type sampleWriter struct {
	dir    string
	frames int
	fps    float64
	// release runs after each decoded chunk is written (the collector; tests swap it).
	release func()

	png   *video.PNGFrames
	hist  *video.Histogram
	mp4   *video.MP4Stream
	enc   string // which MP4 encoder: "ffmpeg" or the uncompressed fallback
	stats video.StatsAccumulator
	next  int
	// params is how the video was made (the PNG text and MP4 comment).
	params string
}

// newSampleWriter writes a video of frames frames of width x height at fps into dir; params
// (when set) says how it was made: each PNG frame's "parameters" text and the MP4's comment.
func newSampleWriter(dir string, frames, width, height int, fps float64, params string) (*sampleWriter, error) {
	png, err := video.NewPNGFrames(filepath.Join(dir, "frames"), frames)
	if err != nil {
		return nil, err
	}
	if params != "" {
		png.Text = []video.TextChunk{{Key: "parameters", Text: params}}
	}
	s := &sampleWriter{dir: dir, frames: frames, fps: fps, png: png, hist: video.NewHistogram(), release: releaseHeap, params: params}
	s.mp4, err = video.MP4Writer{Comment: params}.Start(filepath.Join(dir, "video.mp4"), width, height, fps)
	switch {
	case err == nil:
		s.enc = "ffmpeg"
	case errors.Is(err, video.ErrNoFFmpeg):
		s.enc = "uncompressed (ffmpeg not on PATH)" // written at the end (video.WriteMP4PCM)
	default:
		return nil, err
	}
	return s, nil
}

// add writes decoded frames [k, 3, H, W] in [0, 1] that start at frame first.
func (s *sampleWriter) add(first int, unit *tensor.Dense) error {
	if first != s.next {
		return fmt.Errorf("generate: decoded frame %d arrived before frame %d", first, s.next)
	}
	s.stats.Add(unit.Data)
	imgs, err := video.FramesFromTensor(unit)
	if err != nil {
		return err
	}
	if s.next+len(imgs) > s.frames {
		return fmt.Errorf("generate: %d frames decoded, the video has %d", s.next+len(imgs), s.frames)
	}
	for i, img := range imgs {
		if err := s.png.Write(s.next+i, img); err != nil {
			return err
		}
		s.hist.Add(img)
		if s.mp4 != nil {
			if err := s.mp4.Write(img); err != nil {
				if ferr := s.mp4.Abort(); ferr != nil {
					err = ferr
				}
				s.mp4 = nil
				return err
			}
		}
	}
	s.next += len(imgs)
	s.release()
	return nil
}

// finish writes the GIF (and the uncompressed MP4 without ffmpeg) and closes the MP4.
func (s *sampleWriter) finish() error {
	if s.next != s.frames {
		return fmt.Errorf("generate: %d of %d frames decoded", s.next, s.frames)
	}
	err := atomicfile.Write(filepath.Join(s.dir, "video.gif"), atomicfile.Options{}, func(w io.Writer) error {
		return video.WriteGIFFrames(w, s.hist.Palette(256), s.frames, s.png.Read, s.fps)
	})
	if err != nil {
		return fmt.Errorf("generate: video.gif: %w", err)
	}
	if s.mp4 != nil {
		err := s.mp4.Close()
		s.mp4 = nil
		return err
	}
	// The uncompressed writer needs every frame before it writes (moov precedes mdat).
	imgs := make([]image.Image, s.frames)
	for i := range imgs {
		if imgs[i], err = s.png.Read(i); err != nil {
			return err
		}
	}
	return atomicfile.Write(filepath.Join(s.dir, "video.mp4"), atomicfile.Options{}, func(w io.Writer) error {
		return video.WriteMP4PCMComment(w, imgs, max(1, int(math.Round(s.fps))), s.params)
	})
}

// abort drops what an error left half written.
func (s *sampleWriter) abort() {
	if s.mp4 != nil {
		s.mp4.Abort()
		s.mp4 = nil
	}
	s.png.Remove()
}

// releaseHeap runs the collector twice after a decoded chunk is written: the decoder's
// activations are garbage by then, and the second cycle also empties the backend's buffer
// pools (a sync.Pool keeps buffers through one cycle). Each chunk then starts from the
// same heap, so the peak does not climb with the number of chunks; a cycle costs
// milliseconds against a chunk's decode.
func releaseHeap() {
	runtime.GC()
	runtime.GC()
}
