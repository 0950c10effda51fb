// Command framediff compares the frames of two `vdpp generate` sample folders
// (frames/NNN.png): the PSNR over the whole video and the mean SSIM of its frames, as vdpp
// eval scores them (values in [0, 1]).
//
//	go run ./scripts/framediff OUT_A/sample-000 OUT_B/sample-000
package main

import (
	"fmt"

	"image/png"
	"log"
	"os"
	"path/filepath"

	"github.com/vdpp/vdpp/eval"
)

func main() {
	if len(os.Args) != 3 {
		log.Fatal("usage: framediff SAMPLE_DIR_A SAMPLE_DIR_B")
	}
	frames, err := filepath.Glob(filepath.Join(os.Args[1], "frames", "*.png"))
	if err != nil || len(frames) == 0 {
		log.Fatalf("framediff: no frames in %s", os.Args[1])
	}
	var all [2][]float32
	var ssim float64
	for _, f := range frames {
		var img [2][]float32
		var c, h, w int
		for i, dir := range os.Args[1:] {
			if img[i], c, h, w, err = load(filepath.Join(dir, "frames", filepath.Base(f))); err != nil {
				log.Fatal(err)
			}
			all[i] = append(all[i], img[i]...)
		}
		s, err := eval.SSIM(img[0], img[1], c, h, w)
		if err != nil {
			log.Fatal(err)
		}
		ssim += s
	}
	psnr, err := eval.PSNR(all[0], all[1])
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("frames %d psnr_db %.2f ssim %.4f\n", len(frames), psnr, ssim/float64(len(frames)))
}

// load reads a PNG as [3, H, W] values in [0, 1].
func load(path string) ([]float32, int, int, int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, 0, 0, err
	}
	defer f.Close()
	im, err := png.Decode(f)
	if err != nil {
		return nil, 0, 0, 0, fmt.Errorf("%s: %w", path, err)
	}
	b := im.Bounds()
	h, w := b.Dy(), b.Dx()
	out := make([]float32, 3*h*w)
	for y := range h {
		for x := range w {
			r, g, bl, _ := im.At(b.Min.X+x, b.Min.Y+y).RGBA()
			for ch, v := range []uint32{r, g, bl} {
				out[(ch*h+y)*w+x] = float32(v) / 0xffff
			}
		}
	}
	return out, 3, h, w, nil
}
