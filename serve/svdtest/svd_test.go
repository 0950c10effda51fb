package svdtest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/png"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/generate"
	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/model/checkpoint"
	_ "github.com/vdpp/vdpp/model/families"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/model/svd"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/sched"
	"github.com/vdpp/vdpp/serve"
	"github.com/vdpp/vdpp/serve/job"
	"github.com/vdpp/vdpp/tensor"
	"github.com/vdpp/vdpp/video"
)

// directRun is one sample of `vdpp generate` written out with the svd calls themselves (not
// through the family seam): noise for (seed, sample 0), preprocessing, conditioning, initial latent
// times init_noise_sigma, every step through one Stepper on a batch of one, decode.
func directRun(t *testing.T, p *svd.Pipeline, imgPath string, pr svd.Params) (final, frames *tensor.Dense) {
	t.Helper()
	img, err := video.LoadImage(imgPath)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := sched.New(p.Sched, pr.Steps)
	if err != nil {
		t.Fatal(err)
	}
	clipPixels, vaeImage, err := p.Preprocess(img, pr)
	if err != nil {
		t.Fatal(err)
	}
	aug, init := p.Noise(pr, 0)
	c, err := p.Condition(clipPixels, vaeImage, aug, pr)
	if err != nil {
		t.Fatal(err)
	}
	lat := tensor.New(init.Shape...)
	for i, v := range init.Data {
		lat.Data[i] = v * sc.InitNoiseSigma
	}
	it := &pipeline.Item{Samples: []int64{0}, Latent: lat, Cond: []model.Conditioning{c.Cond}}
	if pr.Guided() {
		it.Guidance = sched.GuidanceWeights(float32(pr.MinGuidance), float32(pr.MaxGuidance), pr.NumFrames)
	}
	st := &pipeline.Stepper{Model: &svd.Denoiser{P: p}, Sched: sc}
	for it.Step = 0; it.Step < pr.Steps; it.Step++ {
		if err := st.Step(context.Background(), it); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := p.Decode(it.Latent, pr.DecodeChunkSize)
	if err != nil {
		t.Fatal(err)
	}
	return it.Latent, svd.ToUnit(raw)
}

func gifBytes(t *testing.T, frames *tensor.Dense, fps int) []byte {
	t.Helper()
	imgs, err := video.FramesFromTensor(frames)
	if err != nil {
		t.Fatal(err)
	}
	list := make([]image.Image, len(imgs))
	for i, m := range imgs {
		list[i] = m
	}
	var buf bytes.Buffer
	if err := video.WriteGIF(&buf, list, float64(fps)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestServeMatchesGenerate runs one job on the dev checkpoint over real HTTP with two worker
// ranks (one step each), downloads it as latent, MP4 and GIF, and checks it bit for bit
// against the same math run directly in this process and against generate.RunRank.
func TestServeMatchesGenerate(t *testing.T) {
	dir := devDir(t)
	imgBytes, imgPath := inputPNG(t)
	spec := serve.ModelSpec{Name: svd.FamilyName, Dir: dir}
	_, url := startServer(t, spec, 2, job.DefaultLimits())

	t0 := time.Now()
	code, body := submit(t, url, imgBytes, `{"num_frames":2,"height":32,"width":32,"steps":2,"seed":5,"decode_chunk_size":1}`)
	if code != http.StatusAccepted {
		t.Fatalf("submit: %d %v", code, body)
	}
	id, _ := body["id"].(string)
	st := waitDone(t, url, id, 2*time.Minute)
	t.Logf("job %s: %s in %v (server: run %.0f ms)", id, st.State, time.Since(t0), st.Timings.RunMS)
	if st.State != job.StateSucceeded {
		t.Fatalf("job %s: %s: %s", id, st.State, st.Error)
	}
	if st.Params.NumFrames != 2 || st.Params.DecodeChunkSize != 1 || st.Progress.Stages != 2 {
		t.Fatalf("params %+v, stages %d (want 2)", st.Params, st.Progress.Stages)
	}
	got := latent(t, url, id)
	t1 := time.Now()
	code, hdr, mp4 := get(t, url+"/v1/videos/"+id+"/content")
	if code != http.StatusOK || hdr.Get("Content-Type") != "video/mp4" || len(mp4) < 12 || string(mp4[4:8]) != "ftyp" {
		t.Fatalf("mp4: %d %q, %d bytes", code, hdr.Get("Content-Type"), len(mp4))
	}
	code, hdr, gif := get(t, url+"/v1/videos/"+id+"/content?format=gif")
	if code != http.StatusOK || hdr.Get("Content-Type") != "image/gif" || !bytes.HasPrefix(gif, []byte("GIF89a")) {
		t.Fatalf("gif: %d %q, %d bytes", code, hdr.Get("Content-Type"), len(gif))
	}
	t.Logf("mp4+gif render %v", time.Since(t1))
	t1 = time.Now()
	// The same math, directly.
	b, err := nn.NewBackend("")
	if err != nil {
		t.Fatal(err)
	}
	p, err := svd.Load(dir, "", b, svd.AllParts)
	if err != nil {
		t.Fatal(err)
	}
	gen := serve.NewModel(svd.NewSampler(p, checkpoint.DefaultSampling), family.Description{}, spec) // owns p
	defer gen.Close()
	pr := svd.Params(st.Params)
	want, wantFrames := directRun(t, p, imgPath, pr)
	if !tensor.BitEqual(got, want) {
		t.Fatalf("served latent %v differs from the direct run %v: %s (max diff %g)", got.Shape, want.Shape, firstDiff(got.Data, want.Data), tensor.MaxAbsDiff(got, want))
	}
	t.Logf("direct run %v", time.Since(t1))
	frames, err := gen.Decode(context.Background(), got, st.Params)
	if err != nil {
		t.Fatal(err)
	}
	if !tensor.BitEqual(frames, wantFrames) {
		t.Fatalf("Generator.Decode frames differ from the direct decode: %s", firstDiff(frames.Data, wantFrames.Data))
	}
	if !bytes.Equal(gif, gifBytes(t, wantFrames, pr.FPS)) {
		t.Fatal("served GIF differs from the GIF of the direct run's frames")
	}

	if testing.Short() {
		t.Log("-short: not comparing with generate.RunRank")
		return
	}
	t1 = time.Now()
	// `vdpp generate` itself, in this process.
	o := generate.DefaultOptions()
	o.Model, o.Image, o.Out = dir, imgPath, t.TempDir()
	o.NumFrames, o.Steps, o.Height, o.Width, o.Seed, o.DecodeChunkSize = pr.NumFrames, pr.Steps, pr.Height, pr.Width, pr.Seed, pr.DecodeChunkSize
	if err := generate.RunRank(context.Background(), o, comm.SingleProcess(), slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	t.Logf("RunRank %v", time.Since(t1))
	genGIF, err := os.ReadFile(filepath.Join(o.Out, "sample-000", "video.gif"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(gif, genGIF) {
		t.Fatal("served GIF differs from vdpp generate's video.gif")
	}
	imgs, err := video.FramesFromTensor(wantFrames)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range imgs {
		f, err := os.Open(filepath.Join(o.Out, "sample-000", "frames", fmt.Sprintf("%03d.png", i)))
		if err != nil {
			t.Fatal(err)
		}
		g, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !samePixels(m, g) {
			t.Fatalf("frame %d differs from vdpp generate's PNG", i)
		}
	}
}

func samePixels(a, b image.Image) bool {
	if a.Bounds() != b.Bounds() {
		return false
	}
	r := a.Bounds()
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			r1, g1, b1, a1 := a.At(x, y).RGBA()
			r2, g2, b2, a2 := b.At(x, y).RGBA()
			if r1 != r2 || g1 != g2 || b1 != b2 || a1 != a2 {
				return false
			}
		}
	}
	return true
}

// TestBadParamsOverHTTP: parameters the server or the checkpoint refuses get a 4xx JSON
// error and queue nothing.
func TestBadParamsOverHTTP(t *testing.T) {
	dir := devDir(t)
	img, _ := inputPNG(t)
	lim := job.DefaultLimits()
	lim.MaxFrames = 4
	_, url := startServer(t, serve.ModelSpec{Name: svd.FamilyName, Dir: dir}, 1, lim)
	cases := []struct {
		name, params string
		status       int
		code         string
	}{
		{"height not a multiple", `{"height":35,"width":32,"steps":2}`, 400, "bad_params"},
		{"another family's knob", `{"height":32,"width":32,"guidance_scale":2}`, 400, "bad_params"},
		{"frames over --max-frames", `{"num_frames":5,"height":32,"width":32,"steps":2}`, 413, "over_limit"},
		{"min guidance above max (checkpoint rule)", `{"height":32,"width":32,"min_guidance":3.5,"max_guidance":3}`, 400, "bad_params"},
		{"zero steps", `{"height":32,"width":32,"steps":0}`, 400, "bad_params"},
		{"unknown field", `{"height":32,"width":32,"frames":3}`, 400, "bad_params"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, body := submit(t, url, img, c.params)
			if code != c.status || body["code"] != c.code {
				t.Fatalf("got %d %v, want %d %s", code, body, c.status, c.code)
			}
			if msg, _ := body["error"].(string); msg == "" {
				t.Fatalf("no error message: %v", body)
			}
		})
	}
	// No refused request left a job behind (the list sees every job).
	code, _, list := get(t, url+"/v1/videos?limit=100")
	if code != http.StatusOK || !bytes.Contains(list, []byte(`"data": []`)) {
		t.Errorf("jobs after refused requests: %d %s", code, list)
	}
}

// TestCheckParams: the checkpoint's own limits (a VAE with factor 16, 14 frames) on top of
// the server's.
func TestCheckParams(t *testing.T) {
	p := &svd.Pipeline{}
	p.VAEConfig.BlockOutChannels = []int{8, 8, 8, 8, 8} // factor 16
	p.UNetConfig.NumFrames = 14
	g := serve.NewModel(svd.NewSampler(p, checkpoint.DefaultSampling), family.Description{}, serve.ModelSpec{})
	p.UNetConfig.NumFrames = 99 // New copied the configs
	if d := g.DefaultParams(); d.NumFrames != 14 || d.Steps != 25 || d.Height != 576 || d.Width != 1024 || d.MaxGuidance != 3 {
		t.Fatalf("defaults %+v", d)
	}
	ok := g.DefaultParams()
	ok.Height, ok.Width = 64, 96
	cases := []struct {
		name string
		mod  func(*job.Params)
		bad  bool
	}{
		{"multiples of 16", func(*job.Params) {}, false},
		{"height 72 is not a multiple of 16", func(p *job.Params) { p.Height = 72 }, true},
		{"width 8 below the factor", func(p *job.Params) { p.Width = 8 }, true},
		{"min guidance above max", func(p *job.Params) { p.MinGuidance = 4 }, true},
		{"unguided", func(p *job.Params) { p.MinGuidance, p.MaxGuidance = 1, 1 }, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pp := ok
			c.mod(&pp)
			p2, err := g.ParseParams([]byte(`{"height":`+itoa(pp.Height)+`,"width":`+itoa(pp.Width)+`,"min_guidance":`+ftoa(pp.MinGuidance)+`,"max_guidance":`+ftoa(pp.MaxGuidance)+`}`), job.Limits{})
			if c.bad != (err != nil) || (err != nil && !errors.Is(err, job.ErrBadParams)) {
				t.Fatalf("ParseParams: %v (want bad=%v, wrapping job.ErrBadParams)", err, c.bad)
			}
			if err == nil && p2.NumFrames != 14 {
				t.Fatalf("ParseParams did not take the checkpoint's frames: %+v", p2)
			}
		})
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := g.ParseParams(nil, job.Limits{}); err != nil {
		t.Fatalf("ParseParams reads configs only, also after Close: %v", err)
	}
	if _, err := g.Prepare(context.Background(), family.Input{Image: image.NewGray(image.Rect(0, 0, 4, 4))}, ok, &sched.Euler{Timesteps: make([]float32, ok.Steps)}); !errors.Is(err, serve.ErrModelClosed) {
		t.Fatalf("Prepare after Close: %v", err)
	}
}

// TestOpen: the family's model opens from a folder and is refused without one;
// checkpoint models default to one sample per UNet call, the simulators to four.
func TestOpen(t *testing.T) {
	if _, err := serve.OpenModel(serve.ModelSpec{Name: svd.FamilyName}); err == nil {
		t.Fatal("svd without a folder: no error")
	}
	if _, err := serve.OpenModel(serve.ModelSpec{Name: svd.FamilyName, Dir: filepath.Join(t.TempDir(), "missing")}); err == nil {
		t.Fatal("missing folder: no error")
	}
	sim, err := serve.OpenModel(serve.ModelSpec{Name: "synthetic"})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	if n := sim.MaxBatch(); n != 4 {
		t.Fatalf("synthetic default max batch %d, want 4", n)
	}
	dir := devDir(t)
	g, err := serve.OpenModel(serve.ModelSpec{Name: svd.FamilyName, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if n := g.MaxBatch(); n != 1 {
		t.Fatalf("svd default max batch %d, want 1", n)
	}
	if g.DefaultParams().NumFrames != 3 {
		t.Fatalf("defaults %+v: want the dev checkpoint's 3 frames", g.DefaultParams())
	}
	sc, err := g.Scheduler(job.Params{Steps: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Decode(context.Background(), tensor.New(1, 3, 4, 8, 8), job.Params{NumFrames: 3, Height: 32, Width: 32}); err == nil {
		t.Fatal("Decode of a latent that does not fit the params: no error")
	}
	if _, err := g.Prepare(context.Background(), family.Input{Image: image.NewGray(image.Rect(0, 0, 4, 4))}, job.Params{NumFrames: 3, Steps: 3, Height: 32, Width: 32}, sc); err == nil {
		t.Fatal("Prepare with a schedule of the wrong length: no error")
	}
}
