package video

import (
	"bytes"
	"encoding/binary"
	"image"
	"image/color"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

func pcmGradientFrames(n, w, h int) []image.Image {
	out := make([]image.Image, n)
	for f := range out {
		img := image.NewNRGBA(image.Rect(0, 0, w, h))
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				img.Set(x, y, color.NRGBA{uint8(x * 255 / w), uint8(y * 255 / h), uint8(f * 40), 255})
			}
		}
		out[f] = img
	}
	return out
}

// boxes lists the top-level boxes of an MP4.
func boxes(t *testing.T, b []byte) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for len(b) >= 8 {
		n := int(binary.BigEndian.Uint32(b))
		if n < 8 || n > len(b) {
			t.Fatalf("box %q of %d bytes in %d", b[4:8], n, len(b))
		}
		out[string(b[4:8])] = b[8:n]
		b = b[n:]
	}
	if len(b) != 0 {
		t.Fatalf("%d trailing bytes", len(b))
	}
	return out
}

func TestWriteMP4PCMStructure(t *testing.T) {
	cases := []struct{ n, w, h, fps int }{{1, 16, 16, 7}, {3, 24, 40, 30}, {2, 64, 8, 1}}
	for _, c := range cases {
		var buf bytes.Buffer
		if err := WriteMP4PCM(&buf, pcmGradientFrames(c.n, c.w, c.h), c.fps); err != nil {
			t.Fatal(err)
		}
		bx := boxes(t, buf.Bytes())
		for _, k := range []string{"ftyp", "moov", "mdat"} {
			if _, ok := bx[k]; !ok {
				t.Fatalf("%dx%d: no %s box", c.w, c.h, k)
			}
		}
		// Every sample is a 4-byte length followed by an IDR NAL, and they fill mdat.
		mdat := bx["mdat"]
		count := 0
		for p := 0; p < len(mdat); count++ {
			n := int(binary.BigEndian.Uint32(mdat[p:]))
			if mdat[p+4] != 0x65 {
				t.Fatalf("sample %d is NAL %#x, want an IDR slice", count, mdat[p+4])
			}
			p += 4 + n
		}
		if count != c.n {
			t.Fatalf("%d samples, want %d", count, c.n)
		}
		// Pixels are stored raw: at least 1.5 bytes per padded pixel.
		mbw, mbh := (c.w+15)/16, (c.h+15)/16
		if len(mdat) < c.n*mbw*mbh*384 {
			t.Fatalf("mdat %d bytes is too small for I_PCM", len(mdat))
		}
	}
	if err := WriteMP4PCM(&bytes.Buffer{}, nil, 7); err == nil {
		t.Fatal("no frames: want an error")
	}
}

// TestWriteMP4PCMDecodes decodes the file with ffmpeg when it is installed and compares
// the pixels.
func TestWriteMP4PCMDecodes(t *testing.T) {
	ff, err := exec.LookPath("ffmpeg")
	if err != nil {
		t.Skip("ffmpeg not installed")
	}
	const n, w, h = 3, 40, 24
	frames := pcmGradientFrames(n, w, h)
	var buf bytes.Buffer
	if err := WriteMP4PCM(&buf, frames, 7); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "a.mp4")
	os.WriteFile(path, buf.Bytes(), 0o644)
	out, err := exec.Command(ff, "-v", "error", "-i", path, "-f", "rawvideo", "-pix_fmt", "rgb24", "-").Output()
	if err != nil {
		t.Fatalf("ffmpeg: %v", err)
	}
	if len(out) != n*w*h*3 {
		t.Fatalf("decoded %d bytes, want %d", len(out), n*w*h*3)
	}
	var worst int
	for f := 0; f < n; f++ {
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				r, g, b, _ := frames[f].At(x, y).RGBA()
				want := []int{int(r >> 8), int(g >> 8), int(b >> 8)}
				for c := 0; c < 3; c++ {
					d := int(out[((f*h+y)*w+x)*3+c]) - want[c]
					worst = max(worst, d, -d)
				}
			}
		}
	}
	if worst > 24 { // 4:2:0 chroma subsampling of a gradient, limited range
		t.Fatalf("decoded pixels differ by up to %d", worst)
	}
	t.Logf("max pixel error %d", worst)
}
