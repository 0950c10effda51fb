package plan

import (
	"context"
	"testing"

	"github.com/vdpp/vdpp/model/family"
)

// --measure-prepare times the built-in Wan image-to-video model's conditioning of one
// sample (its CLIP image encoder and the VAE encode of the condition video).
func TestMeasurePrepare(t *testing.T) {
	c := Command{Model: "builtin-wan-i2v", NumFrames: 9, Height: 32, Width: 48, GuidanceScale: 5}
	ms, err := c.measurePrepare(context.Background())
	if err != nil || ms <= 0 {
		t.Fatalf("%v ms, %v", ms, err)
	}
}

// The generate command a plan prints gives the inputs the model takes.
func TestModelInputs(t *testing.T) {
	for _, c := range []struct {
		d    family.Description
		want string
	}{
		{family.Description{Image: family.NeedRequired}, "--image IMAGE.png"},
		{family.Description{TextDim: 32}, `--prompt "..."`},
		{family.Description{TextDim: 32, Image: family.NeedRequired}, `--image IMAGE.png --prompt "..."`},
		{family.Description{TextDim: 32, Image: family.NeedRequired, LastImage: family.NeedRequired}, `--image IMAGE.png --last-image LAST.png --prompt "..."`},
		{family.Description{TextDim: 32, Image: family.NeedOptional}, `--prompt "..."`},
	} {
		if got := modelInputs(c.d); got != c.want {
			t.Errorf("%+v: %q, want %q", c.d, got, c.want)
		}
	}
}
