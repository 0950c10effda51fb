package procedural

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"os"
	"path/filepath"

	"github.com/vdpp/vdpp/safetensors"
	"github.com/vdpp/vdpp/video"
)

// ContactSheet lays out rows of frames as one image: row r holds rows[r]'s frames left to
// right, cells separated by a gap of pad pixels of the given colour.
func ContactSheet(rows [][]image.Image, pad int, bg color.Color) *image.RGBA {
	cols, cw, ch := 0, 0, 0
	for _, r := range rows {
		cols = max(cols, len(r))
		for _, f := range r {
			cw, ch = max(cw, f.Bounds().Dx()), max(ch, f.Bounds().Dy())
		}
	}
	w := cols*cw + (cols+1)*pad
	h := len(rows)*ch + (len(rows)+1)*pad
	sheet := image.NewRGBA(image.Rect(0, 0, max(w, 1), max(h, 1)))
	draw.Draw(sheet, sheet.Bounds(), image.NewUniform(bg), image.Point{}, draw.Src)
	for ri, r := range rows {
		for ci, f := range r {
			at := image.Pt(pad+ci*(cw+pad), pad+ri*(ch+pad))
			draw.Draw(sheet, image.Rectangle{Min: at, Max: at.Add(f.Bounds().Size())}, f, f.Bounds().Min, draw.Src)
		}
	}
	return sheet
}

// WriteContactSheet encodes ContactSheet(rows, 2, white) as PNG to w.
func WriteContactSheet(w io.Writer, rows [][]image.Image) error {
	return png.Encode(w, ContactSheet(rows, 2, color.White))
}

// WriteContactSheetFile writes the contact sheet PNG to path.
func WriteContactSheetFile(path string, rows [][]image.Image) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("procedural: contact sheet: %w", err)
	}
	if err := WriteContactSheet(f, rows); err != nil {
		f.Close()
		return fmt.Errorf("procedural: contact sheet %s: %w", path, err)
	}
	return f.Close()
}

// Images converts RGBA frames to image.Image values.
func Images(frames []*image.RGBA) []image.Image {
	out := make([]image.Image, len(frames))
	for i, f := range frames {
		out[i] = f
	}
	return out
}

// Format is how Write stores samples.
type Format string

const (
	// PNG writes DIR/<split>/<index>/frame_NNN.png per sample.
	PNG Format = "png"
	// Safetensors writes DIR/<split>.safetensors holding "videos" [N, T, 3, H, W] in [-1, 1].
	Safetensors Format = "safetensors"
)

// Write renders count samples of split starting at index 0 into dir in format, plus a
// contact sheet DIR/<split>_sheet.png of the first min(count, 8) samples. It returns the
// paths written.
func Write(dir string, c Config, seed uint64, split Split, count int, format Format) ([]string, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("procedural: %w", err)
	}
	var paths []string
	var sheet [][]image.Image
	switch format {
	case PNG:
		for i := 0; i < count; i++ {
			frames := Images(Video(c, seed, split, i))
			sub := filepath.Join(dir, split.String(), fmt.Sprintf("%05d", i))
			if err := video.WritePNGFrames(sub, frames); err != nil {
				return nil, fmt.Errorf("procedural: sample %d: %w", i, err)
			}
			paths = append(paths, sub)
			if i < 8 {
				sheet = append(sheet, frames)
			}
		}
	case Safetensors:
		b := Batch(c, seed, split, 0, count)
		p := filepath.Join(dir, split.String()+".safetensors")
		meta := map[string]string{"seed": fmt.Sprint(seed), "split": split.String(), "range": "[-1,1]"}
		if err := safetensors.WriteFile(p, []safetensors.NamedTensor{{Name: "videos", Tensor: b}}, meta); err != nil {
			return nil, fmt.Errorf("procedural: %w", err)
		}
		paths = append(paths, p)
		for i := 0; i < min(count, 8); i++ {
			sheet = append(sheet, Images(Video(c, seed, split, i)))
		}
	default:
		return nil, fmt.Errorf("procedural: unknown format %q (want png or safetensors)", format)
	}
	sp := filepath.Join(dir, split.String()+"_sheet.png")
	if err := WriteContactSheetFile(sp, sheet); err != nil {
		return nil, err
	}
	return append(paths, sp), nil
}
