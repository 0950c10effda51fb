package video

import (
	"errors"
	"fmt"
	"image"
	"image/color"
	_ "image/jpeg" // register the JPEG decoder
	_ "image/png"  // register the PNG decoder
	"os"
)

// ErrNotImage is returned (wrapped, with the file name) when a file is not a decodable
// PNG or JPEG image.
var ErrNotImage = errors.New("video: not a PNG or JPEG image")

// LoadImage decodes the PNG or JPEG file at path.
func LoadImage(path string) (image.Image, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("video: load image: %w", err)
	}
	defer f.Close()
	img, _, err := image.Decode(f)
	if err != nil {
		return nil, fmt.Errorf("%w: %s (%v)", ErrNotImage, path, err)
	}
	return img, nil
}

// rgb8 returns the image as packed 8-bit RGB rows (H·W·3 bytes), dropping alpha the way
// PIL's convert("RGB") does (the stored, non-premultiplied colour is kept).
func rgb8(img image.Image) (pix []uint8, w, h int) {
	b := img.Bounds()
	w, h = b.Dx(), b.Dy()
	pix = make([]uint8, 0, w*h*3)
	switch m := img.(type) {
	case *image.NRGBA:
		for y := b.Min.Y; y < b.Max.Y; y++ {
			row := m.Pix[m.PixOffset(b.Min.X, y):]
			for x := 0; x < w; x++ {
				pix = append(pix, row[4*x], row[4*x+1], row[4*x+2])
			}
		}
	case *image.RGBA:
		// Premultiplied; opaque pixels are exact, others are un-premultiplied.
		for y := b.Min.Y; y < b.Max.Y; y++ {
			for x := b.Min.X; x < b.Max.X; x++ {
				c := color.NRGBAModel.Convert(m.RGBAAt(x, y)).(color.NRGBA)
				pix = append(pix, c.R, c.G, c.B)
			}
		}
	default:
		for y := b.Min.Y; y < b.Max.Y; y++ {
			for x := b.Min.X; x < b.Max.X; x++ {
				c := color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA)
				pix = append(pix, c.R, c.G, c.B)
			}
		}
	}
	return pix, w, h
}
