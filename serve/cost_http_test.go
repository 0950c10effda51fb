package serve

import (
	"bytes"
	"net/http"
	"reflect"
	"slices"
	"testing"

	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/knob"
	"github.com/vdpp/vdpp/serve/job"
	"github.com/vdpp/vdpp/serve/openai"
)

// TestCostLimitsHTTP checks that both APIs refuse, with a 413 naming the parameter, a job
// over the served model's cost limits, queue nothing, and show the limits.
func TestCostLimitsHTTP(t *testing.T) {
	// The synthetic model's native job is 64x64, 14 frames, 25 steps; a multiple of 1
	// admits exactly that much.
	ts := startServer(t, Config{CostMultiple: 1, Spec: ModelSpec{Name: "synthetic"}, hostMemory: func() int64 { return 8 << 30 }})
	img := testPNG(t, 1)

	body, ct := multipartBody(t, img, `{"num_frames":14,"steps":26}`)
	resp, b := ts.do("POST", "/v1/videos", body, ct)
	var e apiError
	mustJSON(t, b, &e)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || e.Code != "over_cost_limit" || !bytes.Contains(b, []byte("pixels x frames x steps")) {
		t.Fatalf("native, 26 steps: %d %s", resp.StatusCode, b)
	}
	oa, oct := oaMultipart(t, img, "size", "64x64", "seconds", "3")
	resp, b = ts.do("POST", "/v1/videos", oa, oct)
	checkOAError(t, resp, b, http.StatusRequestEntityTooLarge, "over_cost_limit", "seconds")
	oa, oct = oaMultipart(t, img, "size", "64x64", "num_inference_steps", "30")
	resp, b = ts.do("POST", "/v1/videos", oa, oct)
	checkOAError(t, resp, b, http.StatusRequestEntityTooLarge, "over_cost_limit", "num_inference_steps")
	if n, _ := ts.coord.Counts(); n[job.StateQueued]+n[job.StateRunning]+n[job.StateSucceeded] != 0 {
		t.Fatalf("refused requests queued jobs: %v", n)
	}
	// The native job itself is admitted.
	st := ts.submit(img, `{"steps":2}`)
	if st.ID == "" {
		t.Fatalf("native job refused: %+v", st)
	}

	want := job.ModelLimits{Input: job.InputImage, Image: "required", LastImage: "none", NativeWidth: 64, NativeHeight: 64, NativeFrames: 14, NativeSteps: 25,
		MaxFrames: 25, MaxResolution: 1024, MaxSteps: 50, CacheModes: []string{"fbcache", "static"}, Schedulers: []string{"euler", "euler-a", "dpm++2m-karras"}}
	want.Multiple, want.MaxPixels, want.MaxWork = 1, 64*64, 64*64*14*25
	want.MaxActivationBytes = 2 * 4 * 14 * 4 * 8 * 8 // the guided float32 latent [14, 4, 8, 8]
	want.Machine = job.Machine{MemoryBytes: 8 << 30, Ranks: 2}
	want.MaxQueue, want.MaxPrepares = 64, DefaultMaxPrepares()
	want.Defaults = job.DefaultJob{Width: 64, Height: 64, NumFrames: 14, Steps: 25} // the native job fits
	// The inputs: the knob table's, the image required and nothing else taken.
	want.Inputs = knob.AllInputs.Need(map[string]knob.Need{"image": knob.Required})
	var got job.ModelLimits
	resp, b = ts.do("GET", "/v1/limits", nil, "")
	mustJSON(t, b, &got)
	got.Native = job.Params{}
	// The knobs are the synthetic family's table, each with the default a job gets.
	var names []string
	for _, k := range got.Knobs {
		names = append(names, k.Name)
		if k.Name == "steps" && k.Default != float64(25) {
			t.Errorf("steps' default %v, want 25", k.Default)
		}
	}
	if f, _ := family.Lookup("synthetic"); len(names) != len(f.Knobs()) || !slices.Contains(names, "cache_threshold") {
		t.Errorf("knobs %v, want the synthetic family's", names)
	}
	got.Knobs = nil
	if resp.StatusCode != http.StatusOK || !reflect.DeepEqual(got, want) {
		t.Fatalf("GET /v1/limits: %d %+v, want %+v", resp.StatusCode, got, want)
	}
	var models struct{ Data []openai.Model }
	_, b = ts.do("GET", "/v1/models", nil, "")
	mustJSON(t, b, &models)
	if len(models.Data) == 0 || models.Data[0].Limits.MaxWork != want.MaxWork || models.Data[0].Limits.NativeWidth != 64 {
		t.Fatalf("GET /v1/models: %s", b)
	}
}
