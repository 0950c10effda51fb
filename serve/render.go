package serve

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/vdpp/vdpp/serve/job"
	"github.com/vdpp/vdpp/video"
)

// The rendered files of a finished job, written on its first download: the videos, a PNG
// of the first frame and a JPEG grid of every frame (the OpenAI API's variants).
const (
	mp4File         = "output.mp4"
	gifFile         = "output.gif"
	thumbnailFile   = "thumbnail.png"
	spritesheetFile = "spritesheet.jpg"
	// spriteTile is the largest side of one frame in the sprite sheet.
	spriteTile = 256
)

// renderedFile reports whether name is one of a job's rendered files.
func renderedFile(name string) bool {
	switch name {
	case mp4File, gifFile, thumbnailFile, spritesheetFile:
		return true
	}
	return false
}

// output returns the path of job id's rendered file name, rendering the job's files first
// when it is missing. Concurrent first downloads share one render; one that finds its file
// still missing afterwards (removed meanwhile) renders again, once. The render outlives
// the request that started it (others may be waiting on it); Close still cancels it.
func (s *Server) output(ctx context.Context, id, name string) (string, error) {
	if !renderedFile(name) {
		return "", fmt.Errorf("serve: no rendered file %q", name)
	}
	st, err := s.coord.Status(id)
	if err != nil {
		return "", err
	}
	if st.State != job.StateSucceeded {
		return "", fmt.Errorf("%w: job %s is %s", job.ErrNotReady, id, st.State)
	}
	if h := s.hooks.contentRead; h != nil {
		h(id)
	}
	dir, err := s.store.JobDir(id)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, name)
	for try := 0; try < 2; try++ {
		if _, err := os.Stat(path); err == nil {
			break
		}
		shared := context.WithoutCancel(ctx)
		if err := s.flights.do(ctx, id, func() error { return s.render(shared, id, st, dir) }); err != nil {
			return "", err
		}
	}
	return path, nil
}

// render decodes a finished job's final latent once and writes whichever of its rendered
// files are missing, so a model whose decode is expensive decodes each job once. It counts
// as a render for Close (which waits for it; closing the server cancels the decode).
func (s *Server) render(rctx context.Context, id string, st job.Status, dir string) error {
	defer memRelease.soon() // the decoded frames are garbage once used
	if err := s.diskOK(job.DiskBytes(st.Params)); err != nil {
		return err // a full disk is a 507, before anything is decoded
	}
	if err := s.beginRender(); err != nil {
		return err
	}
	defer s.renders.Done()
	ctx, cancel := context.WithCancel(rctx)
	defer cancel()
	defer context.AfterFunc(s.ctx, cancel)()
	b, shape, err := s.readLatent(id)
	if err != nil {
		return err
	}
	lat, err := DecodeLatent(b, shape)
	if err != nil {
		return err
	}
	frames, err := s.gen.Decode(ctx, lat, st.Params)
	if err != nil {
		if s.ctx.Err() != nil {
			return fmt.Errorf("%w: decode of job %s: %v", job.ErrClosed, id, err)
		}
		return err
	}
	imgs, err := video.FramesFromTensor(frames)
	if err != nil {
		return err
	}
	list := make([]image.Image, len(imgs))
	for i, m := range imgs {
		list[i] = m
	}
	missing := func(name string) bool { _, err := os.Stat(filepath.Join(dir, name)); return err != nil }
	if missing(mp4File) {
		if err := s.mp4(filepath.Join(dir, mp4File), list, float64(st.Params.FPS)); err != nil {
			return s.renderWriteError(err)
		}
	}
	for _, f := range []struct {
		name   string
		encode func(*bytes.Buffer) error
	}{
		{gifFile, func(b *bytes.Buffer) error { return video.WriteGIF(b, list, float64(st.Params.FPS)) }},
		{thumbnailFile, func(b *bytes.Buffer) error { return png.Encode(b, list[0]) }},
		{spritesheetFile, func(b *bytes.Buffer) error {
			return jpeg.Encode(b, spriteSheet(list, spriteTile), &jpeg.Options{Quality: 90})
		}},
	} {
		if !missing(f.name) {
			continue
		}
		var buf bytes.Buffer
		if err := f.encode(&buf); err != nil {
			return err
		}
		if err := writeSynced(filepath.Join(dir, f.name), buf.Bytes()); err != nil {
			return s.renderWriteError(err)
		}
	}
	return nil
}

// latent returns succeeded job id's final latent (little-endian float32) and its shape,
// for a download.
func (s *Server) latent(id string) ([]byte, []int, error) {
	if _, err := s.coord.latentShape(id); err != nil {
		return nil, nil, err
	}
	if h := s.hooks.contentRead; h != nil {
		h(id)
	}
	return s.readLatent(id)
}

// readLatent reads succeeded job id's final latent and its shape.
func (s *Server) readLatent(id string) ([]byte, []int, error) {
	shape, err := s.coord.latentShape(id)
	if err != nil {
		return nil, nil, err
	}
	b, err := s.store.ReadFile(id, finalFile)
	if err != nil {
		return nil, nil, err
	}
	return b, shape, nil
}

// spriteSheet lays frames out row-major on a grid of ceil(sqrt(len)) columns, each scaled
// (box filter) so that its longer side is at most tile pixels; unused cells are black.
func spriteSheet(frames []image.Image, tile int) *image.NRGBA {
	if len(frames) == 0 {
		return image.NewNRGBA(image.Rect(0, 0, 1, 1))
	}
	b := frames[0].Bounds()
	scale := math.Min(1, float64(tile)/float64(max(b.Dx(), b.Dy())))
	tw, th := max(1, int(float64(b.Dx())*scale)), max(1, int(float64(b.Dy())*scale))
	cols := int(math.Ceil(math.Sqrt(float64(len(frames)))))
	rows := (len(frames) + cols - 1) / cols
	out := image.NewNRGBA(image.Rect(0, 0, cols*tw, rows*th))
	for i := range out.Pix {
		if i%4 == 3 {
			out.Pix[i] = 255
		}
	}
	for i, f := range frames {
		ox, oy := (i%cols)*tw, (i/cols)*th
		fb := f.Bounds()
		for y := 0; y < th; y++ {
			y0, y1 := fb.Min.Y+y*fb.Dy()/th, fb.Min.Y+max((y+1)*fb.Dy()/th, y*fb.Dy()/th+1)
			for x := 0; x < tw; x++ {
				x0, x1 := fb.Min.X+x*fb.Dx()/tw, fb.Min.X+max((x+1)*fb.Dx()/tw, x*fb.Dx()/tw+1)
				var r, g, bl, n uint32
				for sy := y0; sy < min(y1, fb.Max.Y); sy++ {
					for sx := x0; sx < min(x1, fb.Max.X); sx++ {
						c := color.NRGBAModel.Convert(f.At(sx, sy)).(color.NRGBA)
						r, g, bl, n = r+uint32(c.R), g+uint32(c.G), bl+uint32(c.B), n+1
					}
				}
				if n > 0 {
					out.SetNRGBA(ox+x, oy+y, color.NRGBA{uint8(r / n), uint8(g / n), uint8(bl / n), 255})
				}
			}
		}
	}
	return out
}

// renderWriteError is a failed write of a rendered file: a full disk is the data dir's
// storage trouble (507), anything else stays as it is. A full disk is known by the error
// (ENOSPC, EDQUOT), by ffmpeg's words for it (its exit status wraps no errno), or by the
// data dir having no room left when the write failed, whatever the free-space floor.
func (s *Server) renderWriteError(err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return storageError(err)
	}
	msg := err.Error()
	if strings.Contains(msg, "No space left on device") || strings.Contains(msg, "Disk quota exceeded") {
		return storageError(fmt.Errorf("%w: %w", err, syscall.ENOSPC))
	}
	if free, ferr := s.cfg.freeBytes(); ferr == nil && free < minRenderRoom {
		return storageError(fmt.Errorf("%w (%d bytes free in the data dir): %w", err, free, syscall.ENOSPC))
	}
	return err
}

// minRenderRoom is the free space below which a failed render write is taken for a full
// disk.
const minRenderRoom = 1 << 20
