package parity

import (
	"context"
	"errors"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/internal/goldentest"
	"github.com/vdpp/vdpp/video"
)

// i2vGolden is the committed WanImageToVideoPipeline reference of each variant
// (scripts/wanref/i2v_cases.py).
func i2vGolden(name string) string { return filepath.Join("..", "testdata", "i2v", name) }

// Every variant of WanImageToVideoPipeline: every tensor of every case within its limit,
// every stored tensor reported and compared.
func TestI2VGoldens(t *testing.T) {
	for _, name := range []string{"wan21-i2v", "wan21-flf2v", "wan22-i2v-a14b", "wan22-ti2v"} {
		t.Run(name, func(t *testing.T) {
			dir := i2vGolden(name)
			rep, err := Run(context.Background(), dir, goldentest.Backend(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("\n%s", rep.Table())
			if err := rep.Err(); err != nil || !rep.Pass {
				t.Fatalf("%v", err)
			}
			if want := goldentest.CountOutputs(t, dir); len(rep.Results) != want || rep.Checked() != want {
				t.Fatalf("reported %d tensors (%d checked), the cases hold %d", len(rep.Results), rep.Checked(), want)
			}
		})
	}
}

// Another image than the reference's (the same one mirrored) fails the image-dependent
// tensors: the condition really comes from the case's image.
func TestI2VOtherImageFails(t *testing.T) {
	src, err := filepath.Abs(i2vGolden("wan21-i2v"))
	if err != nil {
		t.Fatal(err)
	}
	dir := goldentest.LinkComponents(t, src, "model_index.json", "transformer", "vae", "scheduler", "image_encoder", "image_processor")
	from := filepath.Join(src, "cases", "i2v_pipeline")
	cd := filepath.Join(dir, "cases", "i2v_pipeline")
	if err := os.MkdirAll(cd, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"case.json", "inputs.safetensors", "outputs.safetensors"} {
		if err := os.Symlink(filepath.Join(from, n), filepath.Join(cd, n)); err != nil {
			t.Fatal(err)
		}
	}
	img, err := video.LoadImage(filepath.Join(from, "image.png"))
	if err != nil {
		t.Fatal(err)
	}
	b := img.Bounds()
	m := image.NewNRGBA(b)
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			m.Set(b.Max.X-1-x+b.Min.X, y, img.At(x, y))
		}
	}
	f, err := os.Create(filepath.Join(cd, "image.png"))
	if err != nil {
		t.Fatal(err)
	}
	if err := png.Encode(f, m); err != nil {
		t.Fatal(err)
	}
	f.Close()
	rep, err := Run(context.Background(), dir, goldentest.Backend(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.Err(); !errors.Is(err, ErrFailed) {
		t.Fatalf("a mirrored image passed: %v\n%s", err, rep.Table())
	}
	for _, r := range rep.Results {
		dependent := r.Tensor == "clip_pixel_values" || r.Tensor == "image_embeds" || r.Tensor == "condition" ||
			r.Tensor == "frames" || strings.HasPrefix(r.Tensor, "noise_pred") || strings.HasPrefix(r.Tensor, "latents")
		if dependent && r.Pass {
			t.Errorf("%s passed with the mirrored image (rel L2 %.3g)", r.Tensor, r.RelL2)
		}
		if (r.Tensor == "timesteps" || r.Tensor == "sigmas") && !r.Pass {
			t.Errorf("%s failed: it does not depend on the image", r.Tensor)
		}
	}
}
