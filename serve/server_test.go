package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vdpp/vdpp/serve/job"
	"github.com/vdpp/vdpp/tensor"
)

const smallJob = `{"num_frames":2,"steps":4,"height":16,"width":16,"seed":%d}`

func TestBadInput(t *testing.T) {
	lim := job.DefaultLimits()
	lim.MaxFrames, lim.MaxResolution, lim.MaxSteps, lim.MaxBodyBytes, lim.MaxImagePixels = 4, 64, 10, 4096, 100*100
	ts := startServer(t, Config{Limits: lim, Spec: ModelSpec{Name: "synthetic"}})
	img := testPNG(t, 1)
	var bigImg bytes.Buffer // 200x200 pixels (over MaxImagePixels) in a small body
	if err := png.Encode(&bigImg, image.NewGray(image.Rect(0, 0, 200, 200))); err != nil || bigImg.Len() > 4000 {
		t.Fatalf("big image: %v (%d bytes)", err, bigImg.Len())
	}
	type req struct {
		method, path string
		img          []byte
		params       string
		rawBody      string
		ctype        string
	}
	cases := []struct {
		name   string
		r      req
		status int
		code   string
	}{
		// A JSON body is the OpenAI create (openai.go); any other non-multipart body is refused.
		{"not multipart", req{method: "POST", path: "/v1/videos", rawBody: `{"steps":2}`, ctype: "text/plain"}, 400, "bad_params"},
		{"no image part", req{method: "POST", path: "/v1/videos", params: `{"steps":2}`}, 400, "bad_params"},
		{"text as image", req{method: "POST", path: "/v1/videos", img: []byte("hello, not an image")}, 415, "not_image"},
		{"truncated png", req{method: "POST", path: "/v1/videos", img: img[:40], params: `{"num_frames":2,"steps":2,"height":16,"width":16}`}, 415, "not_image"},
		{"image over pixel limit", req{method: "POST", path: "/v1/videos", img: bigImg.Bytes()}, 413, "over_limit"},
		{"malformed json", req{method: "POST", path: "/v1/videos", img: img, params: `{"steps":`}, 400, "bad_params"},
		{"json wrong type", req{method: "POST", path: "/v1/videos", img: img, params: `{"steps":"four"}`}, 400, "bad_params"},
		{"unknown field", req{method: "POST", path: "/v1/videos", img: img, params: `{"stepz":4}`}, 400, "bad_params"},
		{"trailing data", req{method: "POST", path: "/v1/videos", img: img, params: `{"steps":4} {}`}, 400, "bad_params"},
		{"height not multiple of 8", req{method: "POST", path: "/v1/videos", img: img, params: `{"height":20,"width":16}`}, 400, "bad_params"},
		{"negative seed", req{method: "POST", path: "/v1/videos", img: img, params: `{"seed":-2,"num_frames":2,"height":16,"width":16}`}, 400, "bad_params"},
		{"unknown cache mode", req{method: "POST", path: "/v1/videos", img: img, params: `{"num_frames":2,"steps":8,"height":16,"width":16,"cache":"teacache"}`}, 400, "bad_params"},
		{"cache threshold <= 0", req{method: "POST", path: "/v1/videos", img: img, params: `{"num_frames":2,"steps":8,"height":16,"width":16,"cache":"fbcache","cache_threshold":-1}`}, 400, "bad_params"},
		{"cache the model lacks", req{method: "POST", path: "/v1/videos", img: img, params: `{"num_frames":2,"steps":8,"height":16,"width":16,"cache":"deepcache"}`}, 400, "bad_params"},
		{"scheduler the model lacks", req{method: "POST", path: "/v1/videos", img: img, params: `{"num_frames":2,"steps":4,"height":16,"width":16,"scheduler":"lcm"}`}, 400, "bad_params"},
		{"flow shift on a model without flow", req{method: "POST", path: "/v1/videos", img: img, params: `{"num_frames":2,"steps":4,"height":16,"width":16,"flow_shift":3}`}, 400, "bad_params"},
		{"too many frames", req{method: "POST", path: "/v1/videos", img: img, params: `{"num_frames":5,"height":16,"width":16}`}, 413, "over_limit"},
		{"resolution over limit", req{method: "POST", path: "/v1/videos", img: img, params: `{"num_frames":2,"height":16,"width":72}`}, 413, "over_limit"},
		{"too many steps", req{method: "POST", path: "/v1/videos", img: img, params: `{"num_frames":2,"steps":11,"height":16,"width":16}`}, 413, "over_limit"},
		{"body over limit", req{method: "POST", path: "/v1/videos", img: bytes.Repeat([]byte{1}, 5000), params: `{}`}, 413, "body_too_large"},
		{"unknown part", req{method: "POST", path: "/v1/videos", rawBody: "--x\r\nContent-Disposition: form-data; name=\"other\"\r\n\r\nv\r\n--x--\r\n", ctype: "multipart/form-data; boundary=x"}, 400, "bad_params"},
		{"unknown id", req{method: "GET", path: "/v1/videos/0123456789abcdef0123"}, 404, "not_found"},
		{"unknown id with odd chars", req{method: "GET", path: "/v1/videos/..%2f..%2fetc"}, 404, "not_found"},
		{"cancel unknown id", req{method: "DELETE", path: "/v1/videos/0123456789abcdef0123"}, 404, "not_found"},
		{"content of unknown id", req{method: "GET", path: "/v1/videos/0123456789abcdef0123/content"}, 404, "not_found"},
		{"events of unknown id", req{method: "GET", path: "/v1/videos/0123456789abcdef0123/events"}, 404, "not_found"},
		{"no route", req{method: "GET", path: "/v2/nothing"}, 404, "no_route"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var body *bytes.Reader
			ctype := tc.r.ctype
			switch {
			case tc.r.rawBody != "":
				body = bytes.NewReader([]byte(tc.r.rawBody))
			case tc.r.method == "POST":
				b, ct := multipartBody(t, tc.r.img, tc.r.params)
				buf := new(bytes.Buffer)
				buf.ReadFrom(b)
				body, ctype = bytes.NewReader(buf.Bytes()), ct
			default:
				body = bytes.NewReader(nil)
			}
			resp, b := ts.do(tc.r.method, tc.r.path, body, ctype)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, b)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Fatalf("content type %q, want application/json", ct)
			}
			var e apiError
			if err := json.Unmarshal(b, &e); err != nil || e.Error == "" || e.Code != tc.code {
				t.Fatalf("error body %s (code %q, want %q): %v", b, e.Code, tc.code, err)
			}
		})
	}
	// The server is still healthy and serves a good job after all of that.
	st := ts.submit(img, fmt.Sprintf(smallJob, 1))
	if got := ts.wait(st.ID, 10*time.Second); got.State != job.StateSucceeded {
		t.Fatalf("good job after bad input: %+v", got)
	}
	t.Run("content before it exists", func(t *testing.T) {
		ts2 := startServer(t, Config{Spec: ModelSpec{Name: "synthetic", StepMS: 20}, NProc: 1})
		st := ts2.submit(img, `{"num_frames":2,"steps":20,"height":16,"width":16}`)
		resp, b := ts2.do("GET", "/v1/videos/"+st.ID+"/content", nil, "")
		if resp.StatusCode != http.StatusConflict {
			t.Fatalf("content of a running job: %d %s", resp.StatusCode, b)
		}
		resp, b = ts2.do("GET", "/v1/videos/"+st.ID+"/content?format=webm", nil, "")
		if resp.StatusCode != http.StatusConflict && resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("bad format: %d %s", resp.StatusCode, b)
		}
	})
}

func TestJobCompletesAndDownloads(t *testing.T) {
	ts := startServer(t, Config{NProc: 2, Spec: ModelSpec{Name: "synthetic"}})
	img := testPNG(t, 3)
	params := `{"num_frames":3,"steps":5,"height":16,"width":24,"seed":7,"min_guidance":1,"max_guidance":2.5}`
	st := ts.submit(img, params)
	if st.State != job.StateQueued && st.State != job.StateRunning {
		t.Fatalf("new job state %s", st.State)
	}
	// Follow the job over server-sent events.
	resp, err := http.Get(ts.url + "/v1/videos/" + st.ID + "/events")
	if err != nil {
		t.Fatal(err)
	}
	var last job.Status
	var events int
	buf := new(bytes.Buffer)
	buf.ReadFrom(resp.Body)
	resp.Body.Close()
	for _, block := range strings.Split(buf.String(), "\n\n") {
		for _, line := range strings.Split(block, "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				events++
				if err := json.Unmarshal([]byte(d), &last); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if last.State != job.StateSucceeded || last.Progress.Step != 5 || events < 2 {
		t.Fatalf("last event %+v after %d events", last, events)
	}
	fin := ts.status(st.ID)
	if fin.Timings.RunMS <= 0 || fin.Timings.TotalMS < fin.Timings.RunMS {
		t.Fatalf("timings %+v", fin.Timings)
	}
	want := reference(t, img, mustParams(t, params))
	if got := ts.latent(st.ID); !tensor.BitEqual(got, want) {
		t.Fatalf("served latent differs from the one-process run (max diff %g)", tensor.MaxAbsDiff(got, want))
	}
	resp2, gif := ts.do("GET", "/v1/videos/"+st.ID+"/content?format=gif", nil, "")
	if resp2.StatusCode != 200 || !bytes.HasPrefix(gif, []byte("GIF89a")) || resp2.Header.Get("Content-Type") != "image/gif" {
		t.Fatalf("gif: %d %q %q", resp2.StatusCode, resp2.Header.Get("Content-Type"), gif[:min(6, len(gif))])
	}
	resp3, mp4 := ts.do("GET", "/v1/videos/"+st.ID+"/content", nil, "")
	switch resp3.StatusCode {
	case 200:
		if len(mp4) < 12 || string(mp4[4:8]) != "ftyp" {
			t.Fatalf("mp4 body does not start with an ftyp box")
		}
	default:
		t.Fatalf("mp4: %d %s", resp3.StatusCode, mp4)
	}
	// The job cannot be cancelled any more.
	if resp, b := ts.do("DELETE", "/v1/videos/"+st.ID, nil, ""); resp.StatusCode != http.StatusConflict {
		t.Fatalf("cancel of a finished job: %d %s", resp.StatusCode, b)
	}
	// Health, readiness and metrics.
	for _, p := range []string{"/healthz", "/readyz"} {
		if resp, b := ts.do("GET", p, nil, ""); resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", p, resp.StatusCode, b)
		}
	}
	_, m := ts.do("GET", "/metrics", nil, "")
	for _, want := range []string{"vdpp_queue_depth 0", `vdpp_jobs{state="succeeded"} 1`, `vdpp_step_latency_seconds_count{stage="1"}`, "vdpp_samples_per_second", "vdpp_samples_completed_total 1"} {
		if !strings.Contains(string(m), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}
