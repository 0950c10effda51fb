package eval

import (
	"fmt"
	"image"
	"image/draw"
	"os"
	"path/filepath"

	"github.com/vdpp/vdpp/data/procedural"
	"github.com/vdpp/vdpp/tensor"
	"github.com/vdpp/vdpp/video"
)

// media collects the first clips of an eval run and writes a contact sheet (rows:
// truth, generated and, when scored, the VAE round trip, per clip) and side-by-side GIFs
// (truth | generated).
type media struct {
	max     int
	sheet   [][]image.Image
	gifDir  string
	written []string
}

func (m *media) keep(i int, truth, pred *tensor.Dense) {
	if i >= m.max {
		return
	}
	tf, err1 := video.FramesFromTensor(truth)
	pf, err2 := video.FramesFromTensor(pred)
	if err1 != nil || err2 != nil {
		return
	}
	rowT, rowP := make([]image.Image, len(tf)), make([]image.Image, len(pf))
	pair := make([]image.Image, len(tf))
	for f := range tf {
		rowT[f], rowP[f] = tf[f], pf[f]
		b := tf[f].Bounds()
		sb := image.NewRGBA(image.Rect(0, 0, 2*b.Dx()+2, b.Dy()))
		draw.Draw(sb, sb.Bounds(), image.White, image.Point{}, draw.Src)
		draw.Draw(sb, b, tf[f], b.Min, draw.Src)
		draw.Draw(sb, b.Add(image.Pt(b.Dx()+2, 0)), pf[f], b.Min, draw.Src)
		pair[f] = sb
	}
	m.sheet = append(m.sheet, rowT, rowP)
	if m.gifDir != "" {
		p := filepath.Join(m.gifDir, fmt.Sprintf("heldout-%02d.gif", i))
		if err := os.MkdirAll(m.gifDir, 0o755); err == nil && video.WriteGIFFile(p, pair, 7) == nil {
			m.written = append(m.written, p)
		}
	}
}

// keepReconstruction adds clip i's VAE round trip under its generated row: whatever the
// VAE loses (colour, small objects) the model cannot produce either.
func (m *media) keepReconstruction(i int, rc *tensor.Dense) {
	if i >= m.max {
		return
	}
	if rf, err := video.FramesFromTensor(rc); err == nil {
		row := make([]image.Image, len(rf))
		for f := range rf {
			row[f] = rf[f]
		}
		m.sheet = append(m.sheet, row)
	}
}

func (m *media) writeSheet(path string) error {
	if path == "" || len(m.sheet) == 0 {
		return nil
	}
	return procedural.WriteContactSheetFile(path, m.sheet)
}
