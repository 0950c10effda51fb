package builtin

import (
	"bytes"
	_ "embed"
	"fmt"
	"image"
	"image/png"
)

// ExampleIndex is the held-out clip (dataset seed 1) whose first frame is the bundled
// example image.
const ExampleIndex = 2

//go:embed example.png
var examplePNG []byte

// ExamplePNG returns the bundled example image, PNG encoded: the first frame of held-out
// clip ExampleIndex of the procedural dataset.
func ExamplePNG() []byte { return append([]byte(nil), examplePNG...) }

// Example decodes the bundled example image.
func Example() (image.Image, error) {
	img, err := png.Decode(bytes.NewReader(examplePNG))
	if err != nil {
		return nil, fmt.Errorf("builtin: example image: %w", err)
	}
	return img, nil
}
