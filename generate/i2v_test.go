package generate

import (
	"path/filepath"
	"strings"
	"testing"
)

// wanI2V returns a committed Wan image-to-video reference folder and its case folder.
func wanI2V(t *testing.T, folder, kase string) (dir, cd string) {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "model", "wan", "testdata", "i2v", folder))
	if err != nil {
		t.Fatal(err)
	}
	return dir, filepath.Join(dir, "cases", kase)
}

// The images a Wan model takes come from the folder: an image-to-video model needs
// --image, a first-last-frame one also --last-image; one that takes no last image refuses
// it; a text-to-video model refuses --image. Each refusal is one line naming the flag.
func TestResolveWanImages(t *testing.T) {
	i2v, i2vCase := wanI2V(t, "wan21-i2v", "i2v_pipeline")
	flf, flfCase := wanI2V(t, "wan21-flf2v", "flf2v_pipeline")
	ti2v, ti2vCase := wanI2V(t, "wan22-ti2v", "ti2v_pipeline")
	opts := func(dir, cd string) Options {
		o := DefaultOptions()
		o.Model, o.Image = dir, filepath.Join(cd, "image.png")
		o.PromptEmbeds = filepath.Join(cd, "inputs.safetensors")
		o.NegativePromptEmbeds = o.PromptEmbeds
		o.NumFrames, o.Height, o.Width, o.Steps = 5, 32, 32, 2
		return o
	}
	for _, c := range []struct {
		name string
		o    Options
		edit func(o *Options)
		want string // "" resolves
	}{
		{"i2v", opts(i2v, i2vCase), func(o *Options) {}, ""},
		{"i2v without image", opts(i2v, i2vCase), func(o *Options) { o.Image = "" }, "is an image-and-prompt-to-video model: --image FILE is required"},
		{"i2v last image", opts(i2v, i2vCase), func(o *Options) { o.LastImage = o.Image }, "--last-image: --model " + i2v + " takes no last image"},
		{"flf2v", opts(flf, flfCase), func(o *Options) { o.LastImage = filepath.Join(flfCase, "last_image.png") }, ""},
		{"flf2v without last image", opts(flf, flfCase), func(o *Options) {}, "first-last-frame model: --last-image FILE is required"},
		{"ti2v with image", opts(ti2v, ti2vCase), func(o *Options) { o.Height, o.Width = 32, 64 }, ""},
		{"ti2v without image", opts(ti2v, ti2vCase), func(o *Options) { o.Image, o.Height, o.Width = "", 32, 64 }, ""},
		{"image not an image", opts(i2v, i2vCase), func(o *Options) { o.Image = filepath.Join(i2vCase, "case.json") }, "case.json"},
		{"last image without image", opts(flf, flfCase), func(o *Options) { o.Image, o.LastImage = "", filepath.Join(flfCase, "last_image.png") }, "--last-image needs --image"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := c.o
			c.edit(&o)
			_, err := Resolve(o)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n")):
				t.Fatalf("err %v, want one line containing %q", err, c.want)
			}
		})
	}
}
