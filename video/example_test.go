package video_test

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/gif"
	"os"
	"path/filepath"

	"github.com/vdpp/vdpp/tensor"
	"github.com/vdpp/vdpp/video"
)

// Example preprocesses an image for the VAE and CLIP, then turns a decoded frame
// tensor into an animated GIF.
func Example() {
	img := image.NewNRGBA(image.Rect(0, 0, 4, 2))
	for x := 0; x < 4; x++ {
		for y := 0; y < 2; y++ {
			img.SetNRGBA(x, y, color.NRGBA{uint8(85 * x), 128, 255, 255})
		}
	}
	vae, err := video.VAEInput(img, 2, 1) // PIL LANCZOS 4x2 -> 2x1, then 2x/255-1
	if err != nil {
		panic(err)
	}
	fmt.Printf("vae %v %.4f\n", vae.Shape, vae.Data)
	clip, err := video.CLIPInput(img, 3, video.CLIPMean, video.CLIPStd)
	if err != nil {
		panic(err)
	}
	fmt.Println("clip", clip.Shape)

	frames := tensor.New(2, 3, 8, 8) // [T,3,H,W] in [0,1]
	for i := range frames.Data {
		frames.Data[i] = float32(i%64) / 63
	}
	fmt.Printf("stats %+.3f\n", video.Stats(frames))
	imgs, err := video.FramesFromTensor(frames)
	if err != nil {
		panic(err)
	}
	var buf bytes.Buffer
	if err := video.WriteGIF(&buf, []image.Image{imgs[0], imgs[1]}, 7); err != nil {
		panic(err)
	}
	g, err := gif.DecodeAll(&buf)
	if err != nil {
		panic(err)
	}
	fmt.Println("gif frames", len(g.Image), "delay", g.Delay[0])
	// Output:
	// vae [1 3 1 2] [-0.6392 0.6392 0.0039 0.0039 1.0000 1.0000]
	// clip [1 3 3 3]
	// stats {+0.000 +1.000 +0.500 +0.293}
	// gif frames 2 delay 14
}

// ExampleWriteGIFFrames streams a video to PNG files and a GIF without holding its
// frames: each decoded chunk goes to its PNG files and into the palette's histogram, then
// the GIF is written from the PNG files read back one at a time.
func ExampleWriteGIFFrames() {
	dir, err := os.MkdirTemp("", "frames")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	const total = 6
	pngs, err := video.NewPNGFrames(dir, total)
	if err != nil {
		panic(err)
	}
	hist := video.NewHistogram()
	var stats video.StatsAccumulator
	for first := 0; first < total; first += 3 { // two decoded chunks of three frames
		chunk := tensor.New(3, 3, 8, 8)
		for i := range chunk.Data {
			chunk.Data[i] = float32((first*64+i)%97) / 96
		}
		stats.Add(chunk.Data)
		imgs, err := video.FramesFromTensor(chunk)
		if err != nil {
			panic(err)
		}
		for i, img := range imgs {
			if err := pngs.Write(first+i, img); err != nil {
				panic(err)
			}
			hist.Add(img)
		}
	}
	var buf bytes.Buffer
	if err := video.WriteGIFFrames(&buf, hist.Palette(256), total, pngs.Read, 7); err != nil {
		panic(err)
	}
	g, err := gif.DecodeAll(&buf)
	if err != nil {
		panic(err)
	}
	fmt.Println("gif frames", len(g.Image), "last png", filepath.Base(pngs.Path(total-1)))
	fmt.Printf("mean %.3f\n", stats.Stats().Mean)
	// Output:
	// gif frames 6 last png 005.png
	// mean 0.495
}
