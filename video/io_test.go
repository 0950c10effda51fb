package video

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/tensor"
)

func TestLoadImage(t *testing.T) {
	dir := t.TempDir()
	src := patternImage(9, 5)
	var pb, jb bytes.Buffer
	if err := png.Encode(&pb, src); err != nil {
		t.Fatal(err)
	}
	smooth := image.NewNRGBA(image.Rect(0, 0, 16, 16))
	for i := 0; i < len(smooth.Pix); i += 4 {
		copy(smooth.Pix[i:], []uint8{90, 160, 220, 255})
	}
	if err := jpeg.Encode(&jb, smooth, &jpeg.Options{Quality: 100}); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"a.png": pb.Bytes(), "b.jpg": jb.Bytes(), "c.txt": []byte("hello, not an image")}
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	img, err := LoadImage(filepath.Join(dir, "a.png"))
	if err != nil {
		t.Fatal(err)
	}
	pix, w, h := rgb8(img)
	want, _, _ := rgb8(src)
	if w != 9 || h != 5 || !bytes.Equal(pix, want) {
		t.Error("PNG round trip changed pixels")
	}
	img, err = LoadImage(filepath.Join(dir, "b.jpg"))
	if err != nil {
		t.Fatal(err)
	}
	pix, _, _ = rgb8(img)
	for i, v := range pix {
		if d := int(v) - int([]uint8{90, 160, 220}[i%3]); d > 2 || d < -2 {
			t.Fatalf("JPEG round trip: byte %d = %d", i, v)
		}
	}
	_, err = LoadImage(filepath.Join(dir, "c.txt"))
	if !errors.Is(err, ErrNotImage) || !strings.Contains(err.Error(), "c.txt") || strings.Contains(err.Error(), "\n") {
		t.Errorf("non-image error = %v", err)
	}
	if _, err := LoadImage(filepath.Join(dir, "missing.png")); err == nil || errors.Is(err, ErrNotImage) {
		t.Errorf("missing file error = %v", err)
	}
}

func TestFramesFromTensorAndStats(t *testing.T) {
	// [T=2, 3, H=1, W=3]
	data := []float32{
		0, 0.5, 1, -0.1, 1.2, 0.25, 0.2, 0.4, 0.6,
		1, 1, 1, 0, 0, 0, float32(math.NaN()), 0.999, 0.001,
	}
	x, _ := tensor.FromData(data, 2, 3, 1, 3)
	fr, err := FramesFromTensor(x)
	if err != nil {
		t.Fatal(err)
	}
	if len(fr) != 2 || fr[0].Bounds().Dx() != 3 || fr[0].Bounds().Dy() != 1 {
		t.Fatalf("got %d frames of %v", len(fr), fr[0].Bounds())
	}
	want0 := []color.NRGBA{{0, 0, 51, 255}, {128, 255, 102, 255}, {255, 64, 153, 255}}
	want1 := []color.NRGBA{{255, 0, 0, 255}, {255, 0, 255, 255}, {255, 0, 0, 255}}
	for i := 0; i < 3; i++ {
		if got := fr[0].NRGBAAt(i, 0); got != want0[i] {
			t.Errorf("frame 0 pixel %d = %v, want %v", i, got, want0[i])
		}
		if got := fr[1].NRGBAAt(i, 0); got != want1[i] {
			t.Errorf("frame 1 pixel %d = %v, want %v", i, got, want1[i])
		}
	}
	x5, _ := tensor.FromData(data, 1, 2, 3, 1, 3)
	if fr5, err := FramesFromTensor(x5); err != nil || len(fr5) != 2 {
		t.Errorf("rank 5: %d frames, %v", len(fr5), err)
	}
	if _, err := FramesFromTensor(tensor.New(2, 4, 1, 1)); err == nil {
		t.Error("4 channels: no error")
	}
	st := Stats(&tensor.Dense{Shape: []int{4}, Data: []float32{1, 2, 3, 6}})
	if st != (FrameStats{Min: 1, Max: 6, Mean: 3, Std: math.Sqrt(3.5)}) {
		t.Errorf("stats %+v", st)
	}
	if st := Stats(tensor.New(0)); st != (FrameStats{}) {
		t.Errorf("empty stats %+v", st)
	}
}

// gradientFrames returns smooth moving gradients, the kind of content SVD produces.
func gradientFrames(n, w, h int) []image.Image {
	out := make([]image.Image, n)
	for f := range out {
		img := image.NewNRGBA(image.Rect(0, 0, w, h))
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				img.SetNRGBA(x, y, color.NRGBA{uint8((x*255/w + 10*f) % 256), uint8(y * 255 / h), uint8(128 + 60*math.Sin(float64(x+y+f)/9)), 255})
			}
		}
		out[f] = img
	}
	return out
}

func TestWriteGIF(t *testing.T) {
	frames := gradientFrames(3, 48, 32)
	var buf bytes.Buffer
	if err := WriteGIF(&buf, frames, 7); err != nil {
		t.Fatal(err)
	}
	g, err := gif.DecodeAll(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Image) != 3 || len(g.Delay) != 3 || g.LoopCount != 0 {
		t.Fatalf("%d frames, %d delays, loop %d", len(g.Image), len(g.Delay), g.LoopCount)
	}
	for i, d := range g.Delay {
		if d != 14 { // 100/7 rounded
			t.Errorf("delay %d = %d, want 14", i, d)
		}
	}
	// Quality: dithering trades per-pixel error for correct local averages, so check
	// both the per-pixel error and the error of 4×4 block means.
	for i, p := range g.Image {
		want, w, h := rgb8(frames[i])
		got, _, _ := rgb8(p)
		var sum, blockSum float64
		for j := range want {
			sum += math.Abs(float64(got[j]) - float64(want[j]))
		}
		for by := 0; by < h; by += 4 {
			for bx := 0; bx < w; bx += 4 {
				for c := 0; c < 3; c++ {
					var d float64
					for y := by; y < by+4; y++ {
						for x := bx; x < bx+4; x++ {
							d += float64(got[(y*w+x)*3+c]) - float64(want[(y*w+x)*3+c])
						}
					}
					blockSum += math.Abs(d / 16)
				}
			}
		}
		mae, blockMAE := sum/float64(len(want)), blockSum/float64(w*h*3/16)
		t.Logf("frame %d: mean abs error %.2f, of 4x4 means %.2f", i, mae, blockMAE)
		if mae > 8 || blockMAE > 3 {
			t.Errorf("frame %d: mean abs error %.2f, of 4x4 means %.2f", i, mae, blockMAE)
		}
	}
	if err := WriteGIF(&buf, nil, 7); !errors.Is(err, ErrNoFrames) {
		t.Errorf("no frames: %v", err)
	}
	for fps, want := range map[float64]int{7: 14, 25: 4, 100: 2, 1000: 2, 0: 10, 3: 33} {
		if got := gifDelay(fps); got != want {
			t.Errorf("gifDelay(%v) = %d, want %d", fps, got, want)
		}
	}
}

func TestMedianCutPalette(t *testing.T) {
	// Four flat colours need exactly four palette entries, reproduced exactly.
	img := image.NewNRGBA(image.Rect(0, 0, 4, 4))
	cols := []color.NRGBA{{255, 0, 0, 255}, {0, 255, 0, 255}, {0, 0, 255, 255}, {250, 250, 250, 255}}
	for i := 0; i < 16; i++ {
		img.SetNRGBA(i%4, i/4, cols[i%4])
	}
	pal := medianCutPalette([]image.Image{img}, 256)
	if len(pal) != 4 {
		t.Fatalf("palette has %d colours", len(pal))
	}
	inv := newInverseMap(pal)
	p := ditherFloydSteinberg(img, inv)
	for i := 0; i < 16; i++ {
		r, g, b, _ := p.At(i%4, i/4).RGBA()
		if c := cols[i%4]; uint8(r>>8) != c.R || uint8(g>>8) != c.G || uint8(b>>8) != c.B {
			t.Fatalf("pixel %d = %v,%v,%v want %v", i, r>>8, g>>8, b>>8, c)
		}
	}
}

func TestWriteFilesAtomically(t *testing.T) {
	dir := t.TempDir()
	frames := gradientFrames(3, 8, 6)
	pdir := filepath.Join(dir, "frames")
	if err := WritePNGFrames(pdir, frames); err != nil {
		t.Fatal(err)
	}
	for i := range frames {
		f, err := os.Open(filepath.Join(pdir, fmt.Sprintf("%03d.png", i)))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		got, _, _ := rgb8(img)
		want, _, _ := rgb8(frames[i])
		if !bytes.Equal(got, want) {
			t.Errorf("frame %d changed", i)
		}
	}
	// A frame that cannot be encoded: nothing is left behind.
	bad := filepath.Join(dir, "bad")
	err := WritePNGFrames(bad, []image.Image{frames[0], frames[1], image.NewNRGBA(image.Rect(0, 0, 0, 0))})
	if err == nil {
		t.Fatal("empty frame: no error")
	}
	if ents, _ := os.ReadDir(bad); len(ents) != 0 {
		t.Errorf("left %d files after error", len(ents))
	}
	gifPath := filepath.Join(dir, "out.gif")
	if err := WriteGIFFile(gifPath, frames, 10); err != nil {
		t.Fatal(err)
	}
	if err := WriteGIFFile(filepath.Join(dir, "none.gif"), nil, 10); !errors.Is(err, ErrNoFrames) {
		t.Errorf("no frames: %v", err)
	}
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if strings.Join(names, ",") != "bad,frames,out.gif" {
		t.Errorf("directory holds %v", names)
	}
}

func TestWriteMP4(t *testing.T) {
	dir := t.TempDir()
	frames := gradientFrames(2, 3, 3) // odd size → padded to 4×4
	out := filepath.Join(dir, "v.mp4")
	noFF := MP4Writer{LookPath: func(string) (string, error) { return "", errors.New("not here") }}
	if err := noFF.Write(out, frames, 7); !errors.Is(err, ErrNoFFmpeg) {
		t.Fatalf("missing ffmpeg: %v", err)
	}
	// A fake ffmpeg that copies its raw input to the output path (its last argument).
	fake := filepath.Join(dir, "fake-ffmpeg")
	script := "#!/bin/sh\nfor a; do last=$a; done\ncat > \"$last\"\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	w := MP4Writer{LookPath: func(string) (string, error) { return fake, nil }}
	if err := w.Write(out, frames, 7); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) != 2*4*4*3 {
		t.Fatalf("raw size %d, want %d", len(raw), 2*4*4*3)
	}
	f1, _, _ := rgb8(frames[1])
	// Frame 1, row 3 (replicated row 2), column 3 (replicated column 2).
	if got, want := raw[48+(3*4+3)*3:][:3], f1[(2*3+2)*3:][:3]; !bytes.Equal(got, want) {
		t.Errorf("padding pixel %v, want %v", got, want)
	}
	// A failing encoder leaves neither the output nor a temporary file.
	failing := filepath.Join(dir, "fail-ffmpeg")
	if err := os.WriteFile(failing, []byte("#!/bin/sh\ncat > /dev/null\necho boom >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out2 := filepath.Join(dir, "w.mp4")
	w.LookPath = func(string) (string, error) { return failing, nil }
	if err := w.Write(out2, frames, 7); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("failing ffmpeg: %v", err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 3 { // fake-ffmpeg, fail-ffmpeg, v.mp4
		t.Errorf("directory holds %d entries", len(ents))
	}
	if err := w.Write(out2, []image.Image{frames[0], gradientFrames(1, 5, 5)[0]}, 7); err == nil {
		t.Error("mixed sizes: no error")
	}
}

func TestWriteMP4RealFFmpeg(t *testing.T) {
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		t.Skip("ffmpeg not on PATH")
	}
	out := filepath.Join(t.TempDir(), "real.mp4")
	if err := WriteMP4(out, gradientFrames(4, 33, 17), 7); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil || len(b) < 8 || string(b[4:8]) != "ftyp" {
		t.Errorf("not an MP4: %v", err)
	}
}
