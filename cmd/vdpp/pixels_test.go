package main

import (
	"image"
	"image/draw"
	"image/png"
	"os"
	"testing"
)

// framePixels decodes a PNG frame to its RGBA pixels: what a comparison of two runs' frames
// compares (the files also carry each run's parameters, which may differ when the pixels do
// not: --prompt against --prompt-embeds of the same text).
func framePixels(t testing.TB, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	rgba := image.NewRGBA(img.Bounds())
	draw.Draw(rgba, rgba.Bounds(), img, img.Bounds().Min, draw.Src)
	return rgba.Pix
}
