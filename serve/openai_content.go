package serve

import (
	"bytes"
	"context"
	"fmt"
	"github.com/vdpp/vdpp/serve/job"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math"
	"net/http"
	"os"
	"path/filepath"
)

// The derived assets of a finished job, written on first download beside output.mp4.
const (
	thumbnailFile   = "thumbnail.png"
	spritesheetFile = "spritesheet.jpg"
	// spriteTile is the largest side of one frame in the sprite sheet.
	spriteTile = 256
)

// oaContent is GET /v1/videos/{id}/content?variant=video|thumbnail|spritesheet: the MP4,
// a PNG of the first frame, or a JPEG grid of every frame (row-major, ceil(sqrt(T))
// columns, each frame scaled to at most spriteTile pixels on its longer side).
func (s *Server) oaContent(w http.ResponseWriter, r *http.Request) {
	id := nativeID(r.PathValue("id"))
	var name, ctype string
	switch v := r.URL.Query().Get("variant"); v {
	case "", "video":
		name, ctype = "output.mp4", "video/mp4"
	case "thumbnail":
		name, ctype = thumbnailFile, "image/png"
	case "spritesheet":
		name, ctype = spritesheetFile, "image/jpeg"
	default:
		s.writeOpenAIError(w, oaErr(http.StatusBadRequest, "invalid_value", "variant", "variant %q must be video, thumbnail or spritesheet", v))
		return
	}
	st, err := s.coord.Status(id)
	if err != nil {
		s.oaFail(w, err, "")
		return
	}
	if st.State != job.StateSucceeded {
		s.oaFail(w, fmt.Errorf("%w: video %s%s is %s", job.ErrNotReady, openAIIDPrefix, id, st.State), "")
		return
	}
	dir, err := s.store.JobDir(id)
	if err != nil {
		s.oaFail(w, err, "")
		return
	}
	// A native render may have written only the MP4 and GIF: then serveAsset renders again.
	s.serveAsset(w, r, id, filepath.Join(dir, name), ctype, st.CreatedAt, s.oaFailRead, func(ctx context.Context) error {
		return s.renderAssets(ctx, id, st, dir)
	})
}

// oaFailRead is failRead in OpenAI's shape: a job that expired or was deleted while its
// files were read is a 404.
func (s *Server) oaFailRead(w http.ResponseWriter, id string, err error) {
	if _, serr := s.coord.Status(id); serr != nil {
		err = serr
	}
	s.oaFail(w, err, "")
}

// renderAssets decodes a finished job's latent once and writes whichever of the MP4, the
// GIF, the thumbnail and the sprite sheet are missing.
func (s *Server) renderAssets(rctx context.Context, id string, st job.Status, dir string) error {
	return s.withDecodedFrames(rctx, id, st, func(list []image.Image) error {
		missing := func(name string) bool { _, err := os.Stat(filepath.Join(dir, name)); return err != nil }
		for _, name := range []string{"output.mp4", "output.gif"} {
			if missing(name) {
				if err := s.writeRendered(filepath.Join(dir, name), list, st.Params.FPS); err != nil {
					return err
				}
			}
		}
		if missing(thumbnailFile) {
			var buf bytes.Buffer
			if err := png.Encode(&buf, list[0]); err != nil {
				return err
			}
			if err := writeSynced(filepath.Join(dir, thumbnailFile), buf.Bytes()); err != nil {
				return err
			}
		}
		if missing(spritesheetFile) {
			var buf bytes.Buffer
			if err := jpeg.Encode(&buf, SpriteSheet(list, spriteTile), &jpeg.Options{Quality: 90}); err != nil {
				return err
			}
			if err := writeSynced(filepath.Join(dir, spritesheetFile), buf.Bytes()); err != nil {
				return err
			}
		}
		return nil
	})
}

// SpriteSheet lays frames out row-major on a grid of ceil(sqrt(len)) columns, each scaled
// (box filter) so that its longer side is at most tile pixels; unused cells are black.
func SpriteSheet(frames []image.Image, tile int) *image.NRGBA {
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
