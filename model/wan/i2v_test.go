package wan_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/vdpp/vdpp/internal/goldentest"
	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/wan"
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
