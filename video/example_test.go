package video_test

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/gif"

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
