package main

import (
	"bytes"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/wan"
	"github.com/vdpp/vdpp/model/wan/wantest"
	"github.com/vdpp/vdpp/serve/job"
)

// TestServeWanCostLimits: a Wan folder is admitted by its own cost model (wan.Sampler's
// step and decode memory on its latent: z_dim channels, 8x spatial and 4x temporal
// compression, its transformer's tokens): /v1/limits shows WanPipeline's native job
// (832x480, 81 frames, 50 steps) and the step memory derived from it, a job over that
// memory is refused with 413 over_cost_limit, and the native job is accepted.
func TestServeWanCostLimits(t *testing.T) {
	t.Parallel()
	model := wantest.PromptFolder(t)
	// A machine where WanPipeline's native job fits (--max-memory): its step or decode
	// takes about 11 GiB, which one rank and the decoder sharing a 23.5 GiB host do not
	// have (checked below).
	fs := startServe(t, serveOptions{}, "--model", model, "--backend", "go", "--nproc", "1",
		"--max-frames", "1000", "--max-resolution", "4096", "--max-steps", "1000", "--max-memory", "64GiB")

	s, err := wan.Load(model, family.Options{Backend: "go", Roles: family.Roles{Decode: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	native := job.Params(s.DefaultParams())
	act := func(p job.Params) int64 { return s.StepActivationBytes(family.Params(p)) }
	want := job.DeriveCostLimits(native, act, job.DefaultCostMultiple)

	_, lb := fs.get("/v1/limits")
	var lim job.ModelLimits
	if err := json.Unmarshal(lb, &lim); err != nil {
		t.Fatal(err)
	}
	// The step memory limit is the model's, or the machine's share when smaller.
	if lim.Machine.MemoryBytes <= 0 || lim.Machine.Ranks != 1 {
		t.Fatalf("GET /v1/limits: %s: no machine memory", lb)
	}
	want = want.WithMachine(lim.Machine)
	if lim.NativeWidth != 832 || lim.NativeHeight != 480 || lim.NativeFrames != 81 || lim.NativeSteps != 50 ||
		lim.MaxPixels != want.MaxPixels || lim.MaxWork != want.MaxWork || lim.MaxActivationBytes != want.MaxActivationBytes {
		t.Fatalf("GET /v1/limits: %s, want %+v", lb, want)
	}
	// The latent Wan's estimate walks, not SVD's: 21 latent frames of 4 channels.
	if got := s.LatentShape(family.Params(native)); got[0] != 21 || got[1] != 4 || got[2] != 60 || got[3] != 104 {
		t.Fatalf("native latent %v", got)
	}

	submit := func(params string) (int, []byte) {
		var body bytes.Buffer
		mw := multipart.NewWriter(&body)
		for k, v := range map[string]string{"params": params, "prompt": "a red fox in the snow"} {
			fw, _ := mw.CreateFormField(k)
			fw.Write([]byte(v))
		}
		mw.Close()
		r, err := http.Post(fs.url+"/v1/videos", mw.FormDataContentType(), &body)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		var b bytes.Buffer
		b.ReadFrom(r.Body)
		return r.StatusCode, b.Bytes()
	}
	// Within the pixel (4x) and work (4x) limits, but twice the native frames at nearly
	// four times its pixels: more memory than either bound (4x the pixels, 4x the frames).
	// The job is a long video (windows of 81 frames), so its step costs one window's; its
	// decode of all 161 frames is what is over.
	big := `{"width":1600,"height":992,"num_frames":161,"steps":10}`
	if c := (job.JobCost(job.Params{Width: 1600, Height: 992, NumFrames: 161, Steps: 10, GuidanceScale: 5}, act)); c.Pixels > want.MaxPixels || c.Work > want.MaxWork || c.ActivationBytes <= want.MaxActivationBytes {
		t.Fatalf("the test job %+v is not over the step memory only (limits %+v)", c, want)
	}
	code, b := submit(big)
	var e struct{ Error, Code string }
	json.Unmarshal(b, &e)
	if code != http.StatusRequestEntityTooLarge || e.Code != "over_cost_limit" || !strings.Contains(e.Error, "working memory") {
		t.Fatalf("oversized Wan job: %d %s", code, b)
	}
	code, b = submit(`{}`)
	var st struct{ ID string }
	json.Unmarshal(b, &st)
	if code != http.StatusAccepted || st.ID == "" {
		t.Fatalf("native Wan job: %d %s", code, b)
	}
	// The native job takes minutes a step on this checkpoint: it is not run to the end.
	req, _ := http.NewRequest(http.MethodDelete, fs.url+"/v1/videos/"+st.ID, nil)
	if r, err := http.DefaultClient.Do(req); err == nil {
		r.Body.Close()
	}
	// On a 23.5 GiB host the native job itself is refused, with the machine's numbers,
	// rather than admitted to run out of memory.
	small := job.DeriveCostLimits(native, act, job.DefaultCostMultiple).WithMachine(job.Machine{MemoryBytes: 47 << 29, WeightBytes: lim.Machine.WeightBytes, Ranks: 1})
	if err := small.Check(job.JobCost(native, act)); err == nil || !strings.Contains(err.Error(), "a step may use on this server") {
		t.Fatalf("the native job on a 23.5 GiB host: %v", err)
	}
	t.Logf("limits %s; refused: %s", lb, e.Error)
}
