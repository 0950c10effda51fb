package main

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/vdpp/vdpp/serve/loadtest"
)

// TestServeFaultOversizedJob: a 1024x1024 job of 25 frames and 50 steps on the built-in
// 64x64 model (within the server-wide flag limits) is refused by the model's cost
// limits with a 413 in under a second, and nothing is queued; a native-size job still runs.
func TestServeFaultOversizedJob(t *testing.T) {
	fs := startServe(t, serveOptions{}, "--model", "builtin", "--nproc", "2")
	start := time.Now()
	code, b := fs.submit(map[string][]byte{"params": []byte(`{"height":1024,"width":1024,"num_frames":25,"steps":50}`), "image": loadtest.TestImage(1)})
	took := time.Since(start)
	var e struct{ Error, Code string }
	json.Unmarshal(b, &e)
	if code != http.StatusRequestEntityTooLarge || e.Code != "over_cost_limit" {
		t.Fatalf("oversized job: %d %s", code, b)
	}
	if took > time.Second {
		t.Fatalf("oversized job refused after %v, want under a second", took)
	}
	if n := fs.metric("vdpp_jobs_submitted_total"); n != 0 {
		t.Fatalf("%v jobs submitted after the refusal", n)
	}
	if q := fs.metric("vdpp_queue_depth"); q != 0 {
		t.Fatalf("queue depth %v after the refusal", q)
	}
	_, lb := fs.get("/v1/limits")
	var lim struct {
		NativeWidth        int   `json:"native_width"`
		NativeHeight       int   `json:"native_height"`
		MaxPixels          int64 `json:"max_pixels"`
		MaxActivationBytes int64 `json:"max_activation_bytes"`
	}
	json.Unmarshal(lb, &lim)
	if lim.NativeWidth != 64 || lim.NativeHeight != 64 || lim.MaxPixels != 4*64*64 || lim.MaxActivationBytes <= 0 {
		t.Fatalf("GET /v1/limits: %s", lb)
	}
	t.Logf("refused in %v: %s; limits %s", took, e.Error, lb)
	id := fs.mustSubmit(`{"steps":2}`, loadtest.TestImage(3))
	if st := fs.wait(id, 120*time.Second); st.State != "succeeded" {
		t.Fatalf("native job after the refusal: %+v", st)
	}
}
