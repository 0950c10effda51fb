package serve

import (
	"bytes"
	"image"
	"image/png"
	"testing"
)

func TestSpriteSheet(t *testing.T) {
	frames := make([]image.Image, 5)
	for i := range frames {
		m := image.NewNRGBA(image.Rect(0, 0, 40, 20))
		for j := range m.Pix {
			m.Pix[j] = uint8(40 * i)
		}
		frames[i] = m
	}
	s := spriteSheet(frames, 20)
	if s.Bounds().Size() != image.Pt(3*20, 2*10) {
		t.Fatalf("sheet %v", s.Bounds())
	}
	// Frame 4 is the second cell of the second row; the last cell is black.
	if c := s.NRGBAAt(25, 15); c.R != 160 || c.A != 255 {
		t.Fatalf("frame 4 cell %v", c)
	}
	if c := s.NRGBAAt(45, 15); c.R != 0 || c.A != 255 {
		t.Fatalf("empty cell %v", c)
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, spriteSheet(nil, 8)); err != nil {
		t.Fatal(err)
	}
}
