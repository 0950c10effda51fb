package builtin

import (
	"bytes"
	"image/png"
	"os"
	"testing"

	"github.com/vdpp/vdpp/data/procedural"
)

// TestExampleIsHeldOutFrame checks that example.png is exactly the first frame of held-out
// clip ExampleIndex; VDPP_WRITE_EXAMPLE=1 rewrites it.
func TestExampleIsHeldOutFrame(t *testing.T) {
	c := procedural.DefaultConfig()
	frame := procedural.Video(c, 1, procedural.HeldOut, ExampleIndex)[0]
	var buf bytes.Buffer
	if err := png.Encode(&buf, frame); err != nil {
		t.Fatal(err)
	}
	if os.Getenv("VDPP_WRITE_EXAMPLE") != "" {
		if err := os.WriteFile("example.png", buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	img, err := Example()
	if err != nil {
		t.Fatal(err)
	}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r1, g1, b1, _ := img.At(x, y).RGBA()
			r2, g2, b2, _ := frame.At(x, y).RGBA()
			if r1 != r2 || g1 != g2 || b1 != b2 {
				t.Fatalf("pixel (%d,%d) differs from held-out clip %d", x, y, ExampleIndex)
			}
		}
	}
}
