package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vdpp/vdpp/serve/loadtest"
)

// TestServeFaultOversizedJob: a 1024x1024 job of 25 frames and 50 steps on the built-in
// 64x64 model (within the server-wide flag limits) is refused by the model's cost
// limits with a 413 in under a second, and nothing is queued; a native-size job still runs.
func TestServeFaultOversizedJob(t *testing.T) {
	t.Parallel()
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
	// An input image far beyond what the model makes (4096x4096 for a 64x64 model; its
	// resize would take the coordinator most of a minute) is refused from its header.
	huge := bigPNG(t, 4096)
	start = time.Now()
	code, b = fs.submit(map[string][]byte{"params": []byte(`{"steps":2}`), "image": huge})
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), "--max-image-pixels") || time.Since(start) > time.Second {
		t.Fatalf("a 4096x4096 image for a 64x64 model: %d %s after %v", code, b, time.Since(start))
	}
	id := fs.mustSubmit(`{"steps":2}`, loadtest.TestImage(3))
	if st := fs.wait(id, 120*time.Second); st.State != "succeeded" {
		t.Fatalf("native job after the refusal: %+v", st)
	}
}

// TestServeMemoryLimit: with --max-memory (here a small one, as on a small device), a job
// whose step needs more than the machine's share is refused 413 with the estimate, the
// limit and the machine's memory, before anything is queued, and /v1/limits shows the
// machine; a job that fits runs.
func TestServeMemoryLimit(t *testing.T) {
	t.Parallel()
	fs := startServe(t, serveOptions{}, "--model", "builtin", "--nproc", "1", "--max-memory", "96MiB", "--max-cost-multiple", "-1")
	code, b := fs.submit(map[string][]byte{"params": []byte(`{"height":512,"width":512,"num_frames":14,"steps":2}`), "image": loadtest.TestImage(1)})
	var e struct{ Error, Code string }
	json.Unmarshal(b, &e)
	if code != http.StatusRequestEntityTooLarge || e.Code != "over_cost_limit" || !strings.Contains(e.Error, "a step may use on this server") ||
		!strings.Contains(e.Error, "96 MiB of memory") {
		t.Fatalf("a job over the machine's memory: %d %s", code, b)
	}
	if n := fs.metric("vdpp_jobs_submitted_total"); n != 0 {
		t.Fatalf("%v jobs submitted after the refusal", n)
	}
	_, lb := fs.get("/v1/limits")
	var lim struct {
		MaxActivationBytes int64 `json:"max_activation_bytes"`
		Machine            struct {
			MemoryBytes int64 `json:"memory_bytes"`
			WeightBytes int64 `json:"weight_bytes"`
			Ranks       int   `json:"ranks"`
		} `json:"machine"`
	}
	json.Unmarshal(lb, &lim)
	if lim.Machine.MemoryBytes != 96<<20 || lim.Machine.WeightBytes <= 0 || lim.Machine.Ranks != 1 || lim.MaxActivationBytes <= 0 {
		t.Fatalf("GET /v1/limits: %s", lb)
	}
	t.Logf("refused: %s", e.Error)
	id := fs.mustSubmit(`{"steps":2}`, loadtest.TestImage(3))
	if st := fs.wait(id, 120*time.Second); st.State != "succeeded" {
		t.Fatalf("a job that fits: %+v", st)
	}
}
