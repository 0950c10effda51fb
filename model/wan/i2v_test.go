package wan_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/internal/goldentest"
	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/wan"
	"github.com/vdpp/vdpp/model/wan/wantest"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/safetensors"
	"github.com/vdpp/vdpp/tensor"
	"github.com/vdpp/vdpp/video"
)

// i2vFolder returns a committed image-to-video reference folder (model/wan/testdata/i2v).
func i2vFolder(t *testing.T, name string) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("testdata", "i2v", name))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// i2vInput reads a reference case's image (and last image) and prompt embeddings.
func i2vInput(t *testing.T, dir, kase string) family.Input {
	t.Helper()
	cd := filepath.Join(dir, "cases", kase)
	var in family.Input
	var err error
	if in.Image, err = video.LoadImage(filepath.Join(cd, "image.png")); err != nil {
		t.Fatal(err)
	}
	if last := filepath.Join(cd, "last_image.png"); fileExists(last) {
		if in.LastImage, err = video.LoadImage(last); err != nil {
			t.Fatal(err)
		}
	}
	f, err := safetensors.Open(filepath.Join(cd, "inputs.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if in.PromptEmbeds, err = f.Tensor("prompt_embeds"); err != nil {
		t.Fatal(err)
	}
	if in.NegativePromptEmbeds, err = f.Tensor("negative_prompt_embeds"); err != nil {
		t.Fatal(err)
	}
	return in
}

// The image-to-video variants on every mesh Wan runs: pp2 (on the two-expert model one
// expert per stage), cfg2, cp2 (Ulysses), dp2 and hybrids give each sample's frames bit
// for bit as one rank does, with the image conditioning made once on the first stage and
// carried with the samples.
func TestI2VMeshesBitIdentical(t *testing.T) {
	for _, c := range []struct {
		folder, kase string
		p            family.Params
		meshes       [][4]int // pp, cfg, cp, dp
	}{
		{"wan22-i2v-a14b", "i2v_pipeline", family.Params{NumFrames: 9, Steps: 4, Height: 32, Width: 48, GuidanceScale: 4, GuidanceScale2: 3, Seed: 3},
			[][4]int{{2, 1, 1, 1}, {1, 2, 1, 1}, {1, 1, 2, 1}, {2, 2, 1, 1}, {1, 2, 2, 1}, {1, 1, 1, 2}}},
		{"wan21-i2v", "i2v_pipeline", family.Params{NumFrames: 9, Steps: 3, Height: 32, Width: 48, GuidanceScale: 5, Seed: 4},
			[][4]int{{2, 1, 1, 1}, {1, 2, 1, 1}, {1, 1, 2, 1}}},
		{"wan21-flf2v", "flf2v_pipeline", family.Params{NumFrames: 9, Steps: 2, Height: 32, Width: 32, GuidanceScale: 4, Seed: 5},
			[][4]int{{1, 1, 2, 1}}},
		{"wan22-ti2v", "ti2v_pipeline", family.Params{NumFrames: 5, Steps: 3, Height: 32, Width: 64, GuidanceScale: 5, Seed: 6},
			[][4]int{{2, 1, 1, 1}, {1, 2, 1, 1}, {1, 1, 2, 1}}},
	} {
		t.Run(c.folder, func(t *testing.T) {
			dir := i2vFolder(t, c.folder)
			in := i2vInput(t, dir, c.kase)
			want := generateMesh(t, dir, in, c.p, 1, 1, 1, 1, 1)
			for _, m := range c.meshes {
				t.Run(fmt.Sprintf("pp%d_cfg%d_cp%d_dp%d", m[0], m[1], m[2], m[3]), func(t *testing.T) {
					got := generateMesh(t, dir, in, c.p, m[0], m[1], m[2], m[3], m[3])
					if !tensor.BitEqual(got[0], want[0]) {
						t.Fatalf("frames differ from one rank (rel L2 %.3g)", tensor.RelL2(got[0], want[0]))
					}
				})
			}
		})
	}
}

// On the two-expert image-to-video model a two-stage pipeline cuts at the expert switch:
// stage 0 holds the high-noise expert and the image conditioner (the VAE whose encoder makes
// the condition), stage 1 the low-noise expert and the VAE that decodes.
func TestI2VStagesHoldOneExpert(t *testing.T) {
	dir := i2vFolder(t, "wan22-i2v-a14b")
	in := i2vInput(t, dir, "i2v_pipeline")
	p := family.Params{NumFrames: 9, Steps: 4, Height: 32, Width: 48, GuidanceScale: 4, Seed: 1}
	one, _ := generate(t, dir, in, p, 1, 1)
	two, loaded := generate(t, dir, in, p, 2, 1)
	if !tensor.BitEqual(one[0], two[0]) {
		t.Fatalf("two stages differ from one (rel L2 %.3g)", tensor.RelL2(one[0], two[0]))
	}
	if want := [][]string{{"transformer", "vae"}, {"transformer_2", "vae"}}; !slices.EqualFunc(loaded, want, slices.Equal[[]string]) {
		t.Fatalf("stages loaded %v, want %v", loaded, want)
	}
}

// The image decides the video: another image gives other frames, the same image the same.
func TestI2VImageConditions(t *testing.T) {
	dir := i2vFolder(t, "wan22-i2v-a14b")
	in := i2vInput(t, dir, "i2v_pipeline")
	p := family.Params{NumFrames: 9, Steps: 2, Height: 32, Width: 48, GuidanceScale: 1, Seed: 2}
	a := generateMesh(t, dir, in, p, 1, 1, 1, 1, 1)
	other := in
	other.Image = i2vInput(t, dir, "i2v_pipeline_last_image").Image
	b := generateMesh(t, dir, other, p, 1, 1, 1, 1, 1)
	if rel := tensor.RelL2(a[0], b[0]); rel < 1e-3 {
		t.Fatalf("another image changed the frames by rel L2 %.3g only", rel)
	}
}

// First Block Cache on an image-to-video model (the condition channels are part of block
// 0's input, so the indicator sees them): a cached run skips calls and its frames and
// decisions are the same on one rank and over pp2 and cfg2.
func TestI2VFirstBlockCache(t *testing.T) {
	dir := i2vFolder(t, "wan22-i2v-a14b")
	in := i2vInput(t, dir, "i2v_pipeline")
	p := family.Params{NumFrames: 9, Steps: 6, Height: 32, Width: 48, GuidanceScale: 4, GuidanceScale2: 3, Seed: 5,
		Cache: pipeline.Cache{Mode: pipeline.CacheFB, Threshold: 0.2}}
	want, logs := generateMeshLogs(t, dir, in, p, 1, 1, 1, 1, 1)
	skipped := 0
	for _, r := range logs[0] {
		if !r.Computed {
			skipped++
		}
	}
	if skipped == 0 {
		t.Fatalf("no call skipped (records %v)", logs[0])
	}
	for _, m := range [][2]int{{2, 1}, {1, 2}} {
		got, gl := generateMeshLogs(t, dir, in, p, m[0], m[1], 1, 1, 1)
		if !tensor.BitEqual(got[0], want[0]) || len(gl[0]) != len(logs[0]) {
			t.Fatalf("pp%d cfg%d: frames or records differ from one rank", m[0], m[1])
		}
	}
}

// A long video runs the image-to-video model in overlapping windows: the condition's
// frames of each window are the whole video's (the image only in the first window, the last
// image only in the last), on one stage and two alike.
func TestI2VWindows(t *testing.T) {
	dir := i2vFolder(t, "wan22-i2v-a14b")
	in := i2vInput(t, dir, "i2v_pipeline_last_image")
	p := family.Params{NumFrames: 17, Steps: 3, Height: 32, Width: 32, GuidanceScale: 3, Seed: 7, Window: 9, Overlap: 4}
	one, _ := generateWindows(t, dir, in, p, 1)
	two, _ := generateWindows(t, dir, in, p, 2)
	if !tensor.BitEqual(one[0], two[0]) {
		t.Fatalf("two stages differ from one (rel L2 %.3g)", tensor.RelL2(one[0], two[0]))
	}
	if n := one[0].Shape[0]; n != 17 {
		t.Fatalf("%d frames, want 17", n)
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// A window's call reads its frames of the whole video's condition: predicting frames
// [a, a+T) with model.Input.FirstFrame a and the whole condition equals predicting them at
// FirstFrame 0 with the condition cut to those frames.
func TestI2VWindowReadsItsConditionFrames(t *testing.T) {
	dir := i2vFolder(t, "wan22-i2v-a14b")
	f, err := wan.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := f.LoadTransformer(1, "", goldentest.Backend(t))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	d := &wan.Denoiser{M: m}
	const frames, a, tw, z, h, w = 5, 2, 2, 4, 4, 4
	r := rand.New(rand.NewPCG(1, 2))
	randn := func(shape ...int) *tensor.Dense {
		x := tensor.New(shape...)
		for i := range x.Data {
			x.Data[i] = float32(r.NormFloat64())
		}
		return x
	}
	cond := randn(z+4, frames, h, w)
	cut := tensor.New(z+4, tw, h, w)
	for c := range z + 4 {
		copy(cut.Data[c*tw*h*w:(c+1)*tw*h*w], cond.Data[(c*frames+a)*h*w:(c*frames+a+tw)*h*w])
	}
	lat := randn(1, tw, z, h, w)
	text := randn(6, 32)
	in := func(first int, c *tensor.Dense) model.Input {
		return model.Input{Latents: lat, Timestep: 500, FirstFrame: first, Uncond: []bool{false},
			Cond: []model.Conditioning{{wan.KeyPromptEmbeds: text, wan.KeyCondition: c}}}
	}
	got, err := d.Predict(context.Background(), in(a, cond))
	if err != nil {
		t.Fatal(err)
	}
	want, err := d.Predict(context.Background(), in(0, cut))
	if err != nil {
		t.Fatal(err)
	}
	if !tensor.BitEqual(got, want) {
		t.Fatalf("window at frame %d: rel L2 %.3g from the cut condition", a, tensor.RelL2(got, want))
	}
	other, err := d.Predict(context.Background(), in(0, cond))
	if err == nil && tensor.BitEqual(other, want) {
		t.Fatal("the window's frames and the first frames of the condition give the same prediction")
	}
}

// otherSizes are image-to-video folders of sizes no committed folder has: other head counts
// and dims, layer counts, text widths, z_dim, CLIP sizes and tokens.
var otherSizes = []wantest.I2VSpec{
	{Variant: wantest.Wan21I2V, Heads: 3, HeadDim: 10, Layers: 3, TextDim: 20, ZDim: 6, CLIPHidden: 30, CLIPHeads: 3, CLIPLayers: 4, CLIPImage: 42, Seed: 1},
	{Variant: wantest.Wan21FLF2V, Heads: 2, HeadDim: 16, Layers: 1, TextDim: 8, ZDim: 4, CLIPHidden: 16, CLIPHeads: 4, CLIPLayers: 2, CLIPImage: 32, CLIPPatch: 8, Seed: 2},
	{Variant: wantest.Wan22A14B, Heads: 4, HeadDim: 8, Layers: 2, TextDim: 12, ZDim: 8, BoundaryRatio: 0.7, FlowShift: 5, Seed: 3},
	{Variant: wantest.Wan22TI2V, Heads: 2, HeadDim: 14, Layers: 2, TextDim: 10, ZDim: 6, Seed: 4},
}

// Folders of other sizes, written here with random weights (the Python reference cannot run
// in CI: scripts/wanref/i2v_cases.py --alt checks such folders against diffusers): every
// size is read from the configs, the pipeline runs, its frames are in [0, 1] and the same
// on one rank and over pp2 and cp2, the condition holds the first-frame mask, and with
// expand_timesteps the final latent's frame 0 is the image's latents.
func TestI2VOtherSizes(t *testing.T) {
	for _, spec := range otherSizes {
		t.Run(spec.Variant, func(t *testing.T) {
			dir := t.TempDir()
			if err := wantest.WriteI2VFolder(dir, spec); err != nil {
				t.Fatal(err)
			}
			p := family.Params{NumFrames: 9, Steps: 3, Height: 32, Width: 64, GuidanceScale: 3, Seed: 9}
			text := spec.TextDim
			rows := 7
			if spec.Variant == wantest.Wan21I2V || spec.Variant == wantest.Wan21FLF2V {
				rows = 512
			}
			in := family.Input{PromptEmbeds: tensor.New(rows, text), NegativePromptEmbeds: tensor.New(rows, text),
				Image: patternImage(50, 37, 1)}
			for i := range in.PromptEmbeds.Data {
				in.PromptEmbeds.Data[i] = float32(i%7) / 7
			}
			if spec.Variant == wantest.Wan21FLF2V {
				in.LastImage = patternImage(31, 44, 2)
			}
			if spec.Variant == wantest.Wan22TI2V {
				p.Height = 64
			}
			want := generateMesh(t, dir, in, p, 1, 1, 1, 1, 1)
			f := want[0]
			if f.Shape[0] != p.NumFrames || f.Shape[1] != 3 || f.Shape[2] != p.Height || f.Shape[3] != p.Width {
				t.Fatalf("frames %v for %d frames of %dx%d", f.Shape, p.NumFrames, p.Width, p.Height)
			}
			for _, v := range f.Data {
				if !(v >= 0 && v <= 1) {
					t.Fatalf("frame value %v outside [0, 1]", v)
				}
			}
			for _, m := range [][4]int{{2, 1, 1, 1}, {1, 1, 2, 1}} {
				got := generateMesh(t, dir, in, p, m[0], m[1], m[2], m[3], 1)
				if !tensor.BitEqual(got[0], f) {
					t.Fatalf("pp%d cp%d differs from one rank (rel L2 %.3g)", m[0], m[2], tensor.RelL2(got[0], f))
				}
			}
			checkCondition(t, dir, in, p, spec)
		})
	}
}

// checkCondition runs one sample's steps on one rank and checks the conditioning: the
// mask channels of WanImageToVideoPipeline (ones on the given frames), or with
// expand_timesteps the final latent's frame 0.
func checkCondition(t *testing.T, dir string, in family.Input, p family.Params, spec wantest.I2VSpec) {
	t.Helper()
	s, err := wan.Load(dir, family.Options{Roles: family.AllRoles})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ic, err := s.ImageConditioning(context.Background(), in, p)
	if err != nil {
		t.Fatal(err)
	}
	lf, h, w := s.LatentShape(p)[0], p.Height/s.VConfig.SpatialFactor(), p.Width/s.VConfig.SpatialFactor()
	if spec.Variant != wantest.Wan22TI2V {
		if want := []int{1, 4 + spec.ZDim, lf, h, w}; !slices.Equal(ic.Condition.Shape, want) {
			t.Fatalf("condition %v, want %v", ic.Condition.Shape, want)
		}
		for ch := range 4 {
			for k := range lf {
				want := float32(0)
				if k == 0 || (in.LastImage != nil && k == lf-1 && ch == 3) {
					want = 1
				}
				if v := ic.Condition.Data[(ch*lf+k)*h*w]; v != want {
					t.Fatalf("mask channel %d latent frame %d is %v, want %v", ch, k, v, want)
				}
			}
		}
		return
	}
	sc, err := s.Scheduler(p)
	if err != nil {
		t.Fatal(err)
	}
	it, err := s.Prepare(context.Background(), in, p, sc, []int64{0})
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.Stepper(sc)
	if err != nil {
		t.Fatal(err)
	}
	var before *tensor.Dense
	st.Updated = func(it *pipeline.Item, k int) { before = it.Latent.Clone() }
	for k := range p.Steps {
		it.Step = k
		if err := st.Step(context.Background(), it); err != nil {
			t.Fatal(err)
		}
	}
	frame := spec.ZDim * h * w
	if !slices.Equal(it.Latent.Data[:frame], ic.Condition.Data) {
		t.Fatal("the final latent's frame 0 is not the image's latents")
	}
	if slices.Equal(before.Data[:frame], ic.Condition.Data) || !slices.Equal(before.Data[frame:], it.Latent.Data[frame:]) {
		t.Fatal("the last step's latent should differ from the final one in frame 0 only")
	}
}

// patternImage is a w × h RGB test image.
func patternImage(w, h, seed int) *image.NRGBA {
	m := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			m.Pix[m.PixOffset(x, y)+0] = uint8(x*37 + seed*11)
			m.Pix[m.PixOffset(x, y)+1] = uint8(y*53 + seed*29)
			m.Pix[m.PixOffset(x, y)+2] = uint8((x*y + 11*seed) % 256)
			m.Pix[m.PixOffset(x, y)+3] = 255
		}
	}
	return m
}

// A folder that cannot run its variant is one error naming the file that says so.
func TestI2VFolderErrors(t *testing.T) {
	edit := func(path string, f func(m map[string]any)) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			data, err := os.ReadFile(filepath.Join(dir, path))
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(data, &m); err != nil {
				t.Fatal(err)
			}
			f(m)
			if data, err = json.Marshal(m); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, path), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range []struct {
		name    string
		variant string
		break_  func(t *testing.T, dir string)
		file    string // the file the error names
		says    string
	}{
		{"image encoder not listed", wantest.Wan21I2V, edit("model_index.json", func(m map[string]any) { m["image_encoder"] = []any{nil, nil} }),
			"model_index.json", "image_encoder is missing"},
		{"image encoder folder gone", wantest.Wan21I2V, func(t *testing.T, dir string) { os.RemoveAll(filepath.Join(dir, "image_encoder")) },
			"image_encoder/config.json", "image encoder's config"},
		{"image processor gone", wantest.Wan21I2V, func(t *testing.T, dir string) { os.RemoveAll(filepath.Join(dir, "image_processor")) },
			"image_processor/preprocessor_config.json", "image processor's config"},
		{"in_channels", wantest.Wan22A14B, edit("transformer_2/config.json", func(m map[string]any) { m["in_channels"] = 8.0 }),
			"transformer_2/config.json", "in_channels 8"},
		{"image_dim vs CLIP", wantest.Wan21I2V, edit("image_encoder/config.json", func(m map[string]any) { m["hidden_size"] = 32.0 }),
			"transformer/config.json", "hidden_size is 32"},
		{"pos_embed", wantest.Wan21FLF2V, edit("transformer/config.json", func(m map[string]any) { m["pos_embed_seq_len"] = 7.0 }),
			"transformer/config.json", "pos_embed_seq_len 7"},
		{"crop vs image_size", wantest.Wan21I2V, edit("image_processor/preprocessor_config.json", func(m map[string]any) {
			m["crop_size"] = map[string]any{"height": 30.0, "width": 30.0}
		}), "preprocessor_config.json", "30x30"},
		{"ti2v patch", wantest.Wan22TI2V, edit("transformer/config.json", func(m map[string]any) { m["patch_size"] = []any{1.0, 1.0, 1.0} }),
			"transformer/config.json", "patch_size [1 1 1]"},
		{"image encoder weights gone", wantest.Wan21I2V, func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, "image_encoder", "model.safetensors")) },
			"image_encoder/model.safetensors", "image encoder"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := wantest.WriteI2VFolder(dir, wantest.I2VSpec{Variant: c.variant}); err != nil {
				t.Fatal(err)
			}
			c.break_(t, dir)
			r, err := family.ResolveDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			err = r.Preflight(family.Options{Roles: family.AllRoles})
			if err == nil || !errors.Is(err, wan.ErrFolder) || !strings.Contains(err.Error(), c.file) || !strings.Contains(err.Error(), c.says) || strings.Count(err.Error(), "\n") > 0 {
				t.Fatalf("error %v; want one line naming %s saying %q", err, c.file, c.says)
			}
		})
	}
}

// Inputs the model cannot take are refused before any work: no image for an
// image-to-video model, a last image for one that takes none, no last image for a
// first-last-frame model, prompt embeddings of other than 512 rows for the image branch.
func TestI2VInputErrors(t *testing.T) {
	p := family.Params{NumFrames: 5, Steps: 1, Height: 32, Width: 32, GuidanceScale: 1}
	img := patternImage(20, 20, 3)
	for _, c := range []struct {
		variant string
		in      family.Input
		says    string
	}{
		{wantest.Wan22A14B, family.Input{}, "no image"},
		{wantest.Wan21I2V, family.Input{Image: img, LastImage: img}, "takes none"},
		{wantest.Wan21FLF2V, family.Input{Image: img}, "no last image"},
		{wantest.Wan22TI2V, family.Input{Image: img, LastImage: img}, "takes none"},
		{wantest.Wan22A14B, family.Input{LastImage: img}, "without the (first) image"},
		{wantest.Wan21I2V, family.Input{Image: img, PromptEmbeds: tensor.New(8, 16)}, "512"},
	} {
		t.Run(c.variant+"/"+c.says, func(t *testing.T) {
			dir := t.TempDir()
			if err := wantest.WriteI2VFolder(dir, wantest.I2VSpec{Variant: c.variant}); err != nil {
				t.Fatal(err)
			}
			s, err := wan.Load(dir, family.Options{Roles: family.AllRoles})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			in := c.in
			if in.PromptEmbeds == nil {
				in.PromptEmbeds = tensor.New(512, 16)
			}
			sc, err := s.Scheduler(p)
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.Prepare(context.Background(), in, p, sc, []int64{0})
			if !errors.Is(err, wan.ErrInput) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("error %v, want wan.ErrInput saying %q", err, c.says)
			}
		})
	}
}
