package generate

import (
	"encoding/json"
	"image"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/internal/shared"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/knob"
	"github.com/vdpp/vdpp/safetensors"
)

// copyCheckpoint copies the golden dev checkpoint (not its cases) into a temp folder.
func copyCheckpoint(t *testing.T) string {
	t.Helper()
	src := shared.Require(t, "golden", "dev")
	dst := t.TempDir()
	err := filepath.Walk(src, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if strings.HasPrefix(rel, "cases") {
			return filepath.SkipDir
		}
		out := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		f, err := os.Create(out)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(f, in)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func writePNG(t *testing.T) string {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, 40, 24))
	for i := range img.Pix {
		img.Pix[i] = uint8(i * 7)
	}
	p := filepath.Join(t.TempDir(), "in.png")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := png.Encode(f, img); err != nil {
		t.Fatal(err)
	}
	return p
}

// Every bad input is caught before any worker starts, as one line naming the file (and the
// tensor where there is one).
func TestResolveRejectsBadInput(t *testing.T) {
	img := writePNG(t)
	tests := []struct {
		name   string
		break_ func(t *testing.T, dir string) (image string)
		want   []string
	}{
		{"truncated safetensors", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "unet", "diffusion_pytorch_model.safetensors")
			b, _ := os.ReadFile(p)
			os.WriteFile(p, b[:len(b)/2], 0o644)
			return img
		}, []string{"unet/diffusion_pytorch_model.safetensors"}},
		{"tensor of the wrong shape", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "vae", "diffusion_pytorch_model.safetensors")
			f, err := safetensors.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			var ts []safetensors.NamedTensor
			for _, n := range f.Names() {
				x, _ := f.Tensor(n)
				if n == "decoder.conv_out.bias" {
					// A trailing 1 (a leading one is the same layout: ggml drops those).
					x.Shape = []int{x.Shape[0], 1}
				}
				ts = append(ts, safetensors.NamedTensor{Name: n, Tensor: x})
			}
			f.Close()
			if err := safetensors.WriteFile(p, ts, nil); err != nil {
				t.Fatal(err)
			}
			return img
		}, []string{"vae/diffusion_pytorch_model.safetensors", "decoder.conv_out.bias", "[3 1]", "[3]"}},
		{"missing config", func(t *testing.T, dir string) string {
			os.Remove(filepath.Join(dir, "unet", "config.json"))
			return img
		}, []string{"unet/config.json"}},
		{"missing model_index", func(t *testing.T, dir string) string {
			os.Remove(filepath.Join(dir, "model_index.json"))
			return img
		}, []string{"model_index.json"}},
		{"non-image input", func(t *testing.T, dir string) string {
			p := filepath.Join(t.TempDir(), "notes.png")
			os.WriteFile(p, []byte("this is not an image"), 0o644)
			return p
		}, []string{"notes.png"}},
		{"missing image", func(t *testing.T, dir string) string {
			return filepath.Join(dir, "nope.jpg")
		}, []string{"nope.jpg"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyCheckpoint(t)
			o := DefaultOptions()
			o.Model, o.Image, o.Height, o.Width = dir, tc.break_(t, dir), 32, 32
			_, err := Resolve(o)
			if err == nil {
				t.Fatal("accepted")
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("error spans several lines: %q", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not mention %q", msg, w)
				}
			}
		})
	}
}

func TestResolveDefaultsAndSizes(t *testing.T) {
	dir := shared.Require(t, "golden", "dev")
	o := DefaultOptions()
	o.Model, o.Image, o.Height, o.Width = dir, writePNG(t), 32, 32
	got, err := Resolve(o)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		NumFrames int `json:"num_frames"`
	}
	b, _ := os.ReadFile(filepath.Join(dir, "unet", "config.json"))
	json.Unmarshal(b, &cfg)
	if got.NumFrames != cfg.NumFrames {
		t.Fatalf("num frames %d, want the config's %d", got.NumFrames, cfg.NumFrames)
	}
	if got.Steps != 25 {
		t.Fatalf("steps %d, want SVD's 25", got.Steps)
	}
	if w := CPUDefaultsWarning(o, got, func(string) bool { return true }); w != "" {
		t.Errorf("warning for a 32x32 video: %q", w)
	}
	o.Height = 31 // not a multiple of the VAE factor (2 for the dev VAE)
	if _, err := Resolve(o); err == nil || !strings.Contains(err.Error(), "multiples") {
		t.Fatalf("bad height: %v", err)
	}
	o.Height, o.NProc, o.Steps = 32, 5, 4
	if _, err := Resolve(o); err == nil {
		t.Fatal("more stages than steps accepted")
	}
}

// knobValue is v as knob name's kind holds it.
func knobValue(name string, v float64) any {
	if k, _ := family.AllKnobs().Lookup(name); k.Kind == knob.Int {
		return int64(v)
	}
	return v
}

// TestResolveSamplingDefaults: guidance and decode chunk left to the model (not given) come from
// the folder's vdpp_sampling.json (SVD's 1 -> 3 and all frames without one, the built-in
// model's 2 -> 4 and 7 frames for builtin); values given stay; a corrupt file is an error
// naming it.
func TestResolveSamplingDefaults(t *testing.T) {
	t.Setenv("VDPP_CACHE_DIR", t.TempDir())
	dir := copyCheckpoint(t)
	img := writePNG(t)
	// -1 leaves a knob to the model (not given); any other value is given.
	resolve := func(model string, minG, maxG float64, chunk int) (Options, error) {
		o := DefaultOptions()
		o.Model, o.Image, o.Height, o.Width = model, img, 32, 32
		for name, v := range map[string]float64{"min_guidance": minG, "max_guidance": maxG, "decode_chunk_size": float64(chunk)} {
			if v != -1 {
				if err := family.AllKnobs().Set(&o.Params, o.Given, name, knobValue(name, v)); err != nil {
					t.Fatal(err)
				}
			}
		}
		return Resolve(o)
	}
	type want struct {
		minG, maxG float64
		chunk      int
	}
	check := func(name string, o Options, err error, w want) {
		t.Helper()
		if err != nil || o.MinGuidance != w.minG || o.MaxGuidance != w.maxG || o.DecodeChunkSize != w.chunk {
			t.Fatalf("%s: guidance %v -> %v, chunk %d (%v); want %v -> %v, chunk %d", name, o.MinGuidance, o.MaxGuidance, o.DecodeChunkSize, err, w.minG, w.maxG, w.chunk)
		}
	}
	o, err := resolve(dir, -1, -1, -1)
	check("folder without the file", o, err, want{1, 3, 0})
	o, err = resolve("builtin", -1, -1, -1)
	check("builtin", o, err, want{2, 4, 7})

	file := filepath.Join(dir, "vdpp_sampling.json")
	if err := os.WriteFile(file, []byte(`{"min_guidance": 1.5, "max_guidance": 5, "decode_chunk_size": 3}`), 0o644); err != nil {
		t.Fatal(err)
	}
	o, err = resolve(dir, -1, -1, -1)
	check("folder with the file", o, err, want{1.5, 5, 3})
	o, err = resolve(dir, 1, -1, 0)
	check("flags given", o, err, want{1, 5, 0})

	if err := os.WriteFile(file, []byte(`{"min_guidance": 1.5, "max_guidance": 5,`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := resolve(dir, -1, -1, -1); err == nil || !strings.Contains(err.Error(), file) {
		t.Fatalf("corrupt vdpp_sampling.json: %v, want an error naming it", err)
	}
}

func TestResolveVAETile(t *testing.T) {
	o := DefaultOptions()
	o.Model, o.Image = "builtin", writePNG(t) // the built-in VAE's factor is 8
	for tile, want := range map[int]string{-2: "--vae-tile -2", 40: "--vae-tile 40: tile of 40 pixels with overlap 0.25: the stride is not whole latent pixels (with overlap 0.25, use a multiple of 32)"} {
		o.VAETile = tile
		if _, err := Resolve(o); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--vae-tile %d: %v, want %q", tile, err, want)
		}
	}
	for _, tile := range []int{0, -1, 32, 64} {
		o.VAETile = tile
		if _, err := Resolve(o); err != nil {
			t.Errorf("--vae-tile %d: %v", tile, err)
		}
	}
}

// An SVD model offers euler (its folder's, filled in), euler-a and dpm++2m-karras, and
// takes no flow shift.
func TestResolveSVDScheduler(t *testing.T) {
	o := DefaultOptions()
	o.Model, o.Image = "builtin", writePNG(t)
	for _, c := range []struct {
		sched string
		shift float64
		want  string
	}{
		{"lcm", 0, `--scheduler "lcm": --model builtin offers euler, euler-a, dpm++2m-karras`},
		{"", 5, "--flow-shift 5: --model builtin is not a flow-matching model"},
	} {
		o.Scheduler, o.FlowShift = c.sched, c.shift
		if _, err := Resolve(o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--scheduler %q --flow-shift %v: %v, want %q", c.sched, c.shift, err, c.want)
		}
	}
	for sched, want := range map[string]string{"": "euler", "euler-a": "euler-a", "dpm++2m-karras": "dpm++2m-karras"} {
		o.Scheduler, o.FlowShift = sched, 0
		r, err := Resolve(o)
		if err != nil || r.Scheduler != want || r.FlowShift != 0 {
			t.Errorf("--scheduler %q: %q, flow shift %v, %v; want %q", sched, r.Scheduler, r.FlowShift, err, want)
		}
	}
}
