package serve

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	_ "image/jpeg"
	"mime/multipart"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vdpp/vdpp/internal/wait"
	"github.com/vdpp/vdpp/serve/job"
	"github.com/vdpp/vdpp/serve/openai"
)

// oaBody is an OpenAI error body.
type oaBody struct {
	Error *struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

// oaMultipart builds an OpenAI create body: text fields and, when img is not nil, the
// input_reference file part.
func oaMultipart(t testing.TB, img []byte, fields ...string) (*bytes.Buffer, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for i := 0; i+1 < len(fields); i += 2 {
		mw.WriteField(fields[i], fields[i+1])
	}
	if img != nil {
		fw, _ := mw.CreateFormFile("input_reference", "in.png")
		fw.Write(img)
	}
	mw.Close()
	return &buf, mw.FormDataContentType()
}

func (ts *testServer) oaCreate(img []byte, fields ...string) openai.Video {
	ts.t.Helper()
	body, ct := oaMultipart(ts.t, img, fields...)
	resp, b := ts.do("POST", "/v1/videos", body, ct)
	if resp.StatusCode != http.StatusOK {
		ts.t.Fatalf("create: %d %s", resp.StatusCode, b)
	}
	var v openai.Video
	mustJSON(ts.t, b, &v)
	return v
}

func (ts *testServer) oaWait(id string) openai.Video {
	ts.t.Helper()
	var v openai.Video
	if !wait.For(20*time.Second, func() bool {
		resp, b := ts.do("GET", "/v1/videos/"+id, nil, "")
		if resp.StatusCode != http.StatusOK {
			ts.t.Fatalf("retrieve %s: %d %s", id, resp.StatusCode, b)
		}
		v = openai.Video{}
		mustJSON(ts.t, b, &v)
		return v.Status == "completed" || v.Status == "failed"
	}) {
		ts.t.Fatalf("video %s still %s", id, v.Status)
	}
	return v
}

// checkOAError asserts an OpenAI-shaped error with status, code and param ("" = null).
func checkOAError(t *testing.T, resp *http.Response, b []byte, status int, code, param string) {
	t.Helper()
	var e oaBody
	if err := json.Unmarshal(b, &e); err != nil || e.Error == nil || e.Error.Message == "" || e.Error.Type == "" {
		t.Fatalf("not an OpenAI error (%v): %s", err, b)
	}
	if resp.StatusCode != status || e.Error.Code == nil || *e.Error.Code != code {
		t.Fatalf("status %d code %v, want %d %s: %s", resp.StatusCode, e.Error.Code, status, code, b)
	}
	got := ""
	if e.Error.Param != nil {
		got = *e.Error.Param
	}
	if got != param {
		t.Fatalf("param %q, want %q: %s", got, param, b)
	}
}

func TestOpenAIFlow(t *testing.T) {
	ts := startServer(t, Config{NProc: 2, Spec: ModelSpec{Name: "synthetic"}, ServedModelNames: []string{"svd-tiny", "alias"}, KeepJobs: time.Hour})
	img := testPNG(t, 2)

	// Multipart, as the SDK sends it: 2 s at 4 fps = 8 frames of 24x16.
	v := ts.oaCreate(img, "model", "alias", "prompt", "a red ball", "seconds", "2", "fps", "4", "size", "24x16",
		"num_inference_steps", "3", "seed", "5", "guidance_scale", "1")
	if !strings.HasPrefix(v.ID, "video_") || v.Object != "video" || v.Model != "svd-tiny" || v.Size != "24x16" ||
		v.Seconds != "2" || v.Prompt == nil || *v.Prompt != "a red ball" || v.RemixedFromVideoID != nil {
		t.Fatalf("created: %+v", v)
	}
	done := ts.oaWait(v.ID)
	if done.Status != "completed" || done.Progress != 100 || done.CompletedAt == nil || done.ExpiresAt == nil ||
		*done.ExpiresAt != *done.CompletedAt+3600 || done.Error != nil {
		t.Fatalf("completed: %+v", done)
	}
	// The same job through the native API: the mapped parameters and the reference bits.
	st := ts.status(strings.TrimPrefix(v.ID, "video_"))
	want := job.Params{NumFrames: 8, Steps: 3, Height: 16, Width: 24, MinGuidance: 1, MaxGuidance: 1, FPS: 4, Seed: 5}
	if !reflect.DeepEqual(st.Params, want) {
		t.Fatalf("params %+v, want %+v", st.Params, want)
	}
	if got, ref := ts.latent(st.ID), reference(t, img, want); !bytes.Equal(encodeLatent(got), encodeLatent(ref)) {
		t.Fatal("latent differs from the one-process reference")
	}

	// Content variants.
	for _, c := range []struct{ variant, ctype string }{{"", "video/mp4"}, {"video", "video/mp4"}, {"thumbnail", "image/png"}, {"spritesheet", "image/jpeg"}} {
		resp, b := ts.do("GET", "/v1/videos/"+v.ID+"/content?variant="+c.variant, nil, "")
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != c.ctype || len(b) == 0 {
			t.Fatalf("variant %q: %d %s", c.variant, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		if c.variant == "thumbnail" || c.variant == "spritesheet" {
			m, _, err := image.Decode(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			wantSize := image.Pt(24, 16)
			if c.variant == "spritesheet" {
				wantSize = image.Pt(3*24, 3*16) // 8 frames on a 3x3 grid
			}
			if m.Bounds().Size() != wantSize {
				t.Fatalf("%s is %v, want %v", c.variant, m.Bounds().Size(), wantSize)
			}
		}
	}
	resp, b := ts.do("GET", "/v1/videos/"+v.ID+"/content?variant=webm", nil, "")
	checkOAError(t, resp, b, 400, "invalid_value", "variant")

	// JSON with a data: URL; no model means the served one.
	js := fmt.Sprintf(`{"prompt":"x","input_reference":{"image_url":"data:image/png;base64,%s"},"size":"16x16","seconds":1,"num_inference_steps":2}`,
		base64.StdEncoding.EncodeToString(img))
	resp, b = ts.do("POST", "/v1/videos", strings.NewReader(js), "application/json")
	if resp.StatusCode != 200 {
		t.Fatalf("JSON create: %d %s", resp.StatusCode, b)
	}
	var v2 openai.Video
	mustJSON(t, b, &v2)
	if v2.Seconds != "1" || v2.Size != "16x16" {
		t.Fatalf("JSON create: %+v", v2)
	}
	ts.oaWait(v2.ID)
	// A native job is visible to the OpenAI API too.
	nat := ts.submit(img, fmt.Sprintf(smallJob, 3))
	ts.wait(nat.ID, 10*time.Second)

	// Pagination: newest first by default, then asc; after walks on.
	ids := []string{"video_" + nat.ID, v2.ID, v.ID}
	var got []string
	after := ""
	for page := 0; page < 5; page++ {
		resp, b := ts.do("GET", "/v1/videos?limit=2"+after, nil, "")
		var l struct {
			Object  string         `json:"object"`
			Data    []openai.Video `json:"data"`
			LastID  *string        `json:"last_id"`
			HasMore bool           `json:"has_more"`
		}
		if resp.StatusCode != 200 {
			t.Fatalf("list: %d %s", resp.StatusCode, b)
		}
		mustJSON(t, b, &l)
		for _, x := range l.Data {
			got = append(got, x.ID)
		}
		if !l.HasMore {
			break
		}
		after = "&after=" + *l.LastID
	}
	if fmt.Sprint(got) != fmt.Sprint(ids) {
		t.Fatalf("desc pages %v, want %v", got, ids)
	}
	resp, b = ts.do("GET", "/v1/videos?order=asc&after="+v.ID, nil, "")
	if !bytes.Contains(b, []byte(v2.ID)) || bytes.Contains(b, []byte(`"id": "`+v.ID)) {
		t.Fatalf("asc after the first: %s", b)
	}
	resp, b = ts.do("GET", "/v1/videos?limit=0", nil, "")
	checkOAError(t, resp, b, 400, "invalid_value", "limit")
	resp, b = ts.do("GET", "/v1/videos?order=up", nil, "")
	checkOAError(t, resp, b, 400, "invalid_value", "order")

	// Delete: the video and its files go; every route then answers 404.
	resp, b = ts.do("DELETE", "/v1/videos/"+v.ID, nil, "")
	if resp.StatusCode != 200 || !bytes.Contains(b, []byte(`"video.deleted"`)) || !bytes.Contains(b, []byte(`"deleted": true`)) {
		t.Fatalf("delete: %d %s", resp.StatusCode, b)
	}
	for _, path := range []string{"/v1/videos/" + v.ID, "/v1/videos/" + v.ID + "/content"} {
		resp, b = ts.do("GET", path, nil, "")
		checkOAError(t, resp, b, 404, "not_found", "")
	}
	if _, err := ts.store.JobDir(st.ID); err == nil {
		if _, err := ts.store.ReadFile(st.ID, inputFile); err == nil {
			t.Fatal("the deleted job's files are still there")
		}
	}
	recs, _ := ts.store.All()
	for _, r := range recs {
		if r.ID == st.ID {
			t.Fatal("the deleted job's record is still there")
		}
	}
	resp, b = ts.do("DELETE", "/v1/videos/"+v.ID, nil, "")
	checkOAError(t, resp, b, 404, "not_found", "")

	// Models.
	resp, b = ts.do("GET", "/v1/models", nil, "")
	if resp.StatusCode != 200 || !bytes.Contains(b, []byte(`"svd-tiny"`)) || !bytes.Contains(b, []byte(`"alias"`)) {
		t.Fatalf("models: %s", b)
	}
	resp, b = ts.do("GET", "/v1/models/nope", nil, "")
	checkOAError(t, resp, b, 404, "model_not_found", "model")

	// The native API is unchanged: a bare id gets the native status.
	resp, b = ts.do("GET", "/v1/videos/"+nat.ID, nil, "")
	if resp.StatusCode != 200 || !bytes.Contains(b, []byte(`"state": "succeeded"`)) {
		t.Fatalf("native status: %s", b)
	}
}

func TestOpenAIErrors(t *testing.T) {
	lim := job.DefaultLimits()
	lim.MaxFrames, lim.MaxResolution, lim.MaxSteps = 8, 64, 10
	ts := startServer(t, Config{Limits: lim, Spec: ModelSpec{Name: "synthetic"}})
	img := testPNG(t, 1)
	cases := []struct {
		name          string
		img           []byte
		fields        []string
		status        int
		code, param   string
		rawJSON, ctyp string
	}{
		{"unknown model", img, []string{"model", "sora-2", "size", "16x16"}, 404, "model_not_found", "model", "", ""},
		{"missing image", nil, []string{"prompt", "x", "size", "16x16"}, 400, "missing_required_parameter", "input_reference", "", ""},
		{"not an image", []byte("hello"), []string{"size", "16x16"}, 415, "not_image", "input_reference", "", ""},
		{"bad size syntax", img, []string{"size", "big"}, 400, "invalid_value", "size", "", ""},
		{"size not a multiple of 8", img, []string{"size", "20x16"}, 400, "invalid_value", "size", "", ""},
		{"size over the limit", img, []string{"size", "720x1280"}, 400, "over_limit", "size", "", ""},
		{"too many seconds", img, []string{"size", "16x16", "seconds", "12"}, 400, "over_limit", "seconds", "", ""},
		{"seconds not a number", img, []string{"size", "16x16", "seconds", "four"}, 400, "invalid_value", "seconds", "", ""},
		{"negative seconds", img, []string{"size", "16x16", "seconds", "-1"}, 400, "invalid_value", "seconds", "", ""},
		{"too many steps", img, []string{"size", "16x16", "seconds", "1", "num_inference_steps", "11"}, 400, "over_limit", "num_inference_steps", "", ""},
		{"bad guidance", img, []string{"size", "16x16", "seconds", "1", "guidance_scale", "-3"}, 400, "invalid_value", "guidance_scale", "", ""},
		{"negative seed", img, []string{"size", "16x16", "seconds", "1", "seed", "-3"}, 400, "invalid_value", "seed", "", ""},
		{"unknown field", img, []string{"size", "16x16", "style", "noir"}, 400, "unknown_parameter", "style", "", ""},
		{"file_id", nil, []string{"input_reference[file_id]", "file-1"}, 400, "invalid_value", "input_reference", "", ""},
		{"remote url", nil, []string{"input_reference[image_url]", "https://example.com/a.png"}, 400, "invalid_value", "input_reference", "", ""},
		{"bad json", nil, nil, 400, "invalid_json", "", `{"prompt":`, "application/json"},
		{"json wrong type", nil, nil, 400, "invalid_value", "seconds", `{"seconds":[4]}`, "application/json"},
		{"json missing image", nil, nil, 400, "missing_required_parameter", "input_reference", `{"prompt":"x"}`, "application/json"},
		{"json bad data url", nil, nil, 400, "invalid_value", "input_reference", `{"input_reference":{"image_url":"data:image/png;base64,!!"}}`, "application/json"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var resp *http.Response
			var b []byte
			if tc.ctyp != "" {
				resp, b = ts.do("POST", "/v1/videos", strings.NewReader(tc.rawJSON), tc.ctyp)
			} else {
				body, ct := oaMultipart(t, tc.img, tc.fields...)
				resp, b = ts.do("POST", "/v1/videos", body, ct)
			}
			checkOAError(t, resp, b, tc.status, tc.code, tc.param)
		})
	}
	if n, _ := ts.coord.Counts(); n[job.StateQueued]+n[job.StateRunning]+n[job.StateSucceeded] != 0 {
		t.Fatalf("refused requests queued jobs: %v", n)
	}
	// Unknown ids on every OpenAI route.
	for _, r := range []struct{ method, path string }{{"GET", "/v1/videos/video_0123456789abcdef0123"},
		{"DELETE", "/v1/videos/video_0123456789abcdef0123"}, {"GET", "/v1/videos/video_0123456789abcdef0123/content"},
		{"POST", "/v1/videos/video_0123456789abcdef0123/cancel"}, {"GET", "/v1/videos?after=video_0123456789abcdef0123"}} {
		resp, b := ts.do(r.method, r.path, nil, "")
		checkOAError(t, resp, b, 404, "not_found", "")
	}
}

func TestOpenAICancelDeleteAndQueueFull(t *testing.T) {
	ts := startServer(t, Config{NProc: 1, MaxRunning: 1, MaxQueue: 1, Spec: ModelSpec{Name: "synthetic", StepMS: 20}})
	img := testPNG(t, 4)
	running := ts.oaCreate(img, "size", "16x16", "seconds", "1", "fps", "2", "num_inference_steps", "50")
	queued := ts.oaCreate(img, "size", "16x16", "seconds", "1", "fps", "2", "num_inference_steps", "2")
	body, ct := oaMultipart(t, img, "size", "16x16")
	resp, b := ts.do("POST", "/v1/videos", body, ct)
	checkOAError(t, resp, b, 429, "queue_full", "")
	if resp.Header.Get("Retry-After") == "" {
		t.Fatal("429 without Retry-After")
	}
	// Content of an unfinished job is a conflict.
	resp, b = ts.do("GET", "/v1/videos/"+running.ID+"/content", nil, "")
	checkOAError(t, resp, b, 409, "conflict", "")
	// Cancel the queued one: it ends failed with error code cancelled.
	resp, b = ts.do("POST", "/v1/videos/"+queued.ID+"/cancel", nil, "")
	var c openai.Video
	mustJSON(t, b, &c)
	if resp.StatusCode != 200 || c.Status != "failed" || c.Error == nil || c.Error.Code != "cancelled" {
		t.Fatalf("cancel: %d %s", resp.StatusCode, b)
	}
	// Delete the running one: cancelled at its next step, then deleted.
	resp, b = ts.do("DELETE", "/v1/videos/"+running.ID, nil, "")
	if resp.StatusCode != 200 {
		t.Fatalf("delete running: %d %s", resp.StatusCode, b)
	}
	resp, b = ts.do("GET", "/v1/videos/"+running.ID, nil, "")
	checkOAError(t, resp, b, 404, "not_found", "")
	// Cancelling a finished job is a conflict.
	resp, b = ts.do("POST", "/v1/videos/"+queued.ID+"/cancel", nil, "")
	checkOAError(t, resp, b, http.StatusConflict, "conflict", "") // a cancelled job has ended too
	done := ts.oaCreate(img, "size", "16x16", "seconds", "1", "fps", "2", "num_inference_steps", "1")
	ts.oaWait(done.ID)
	resp, b = ts.do("POST", "/v1/videos/"+done.ID+"/cancel", nil, "")
	checkOAError(t, resp, b, 409, "conflict", "")
}

func TestOpenAIAuthAndPage(t *testing.T) {
	ts := startServer(t, Config{Token: "s3cret", Spec: ModelSpec{Name: "synthetic"}})
	resp, b := ts.do("GET", "/v1/videos", nil, "")
	checkOAError(t, resp, b, 401, "invalid_api_key", "")
	resp, b = ts.do("GET", "/v1/models", nil, "", "Authorization", "Bearer s3cret")
	if resp.StatusCode != 200 {
		t.Fatalf("models with the token: %d %s", resp.StatusCode, b)
	}
	// The page and its files need no token (they hold no data); the API still does.
	for _, p := range []string{"/", "/web/app.js", "/web/style.css"} {
		resp, b := ts.do("GET", p, nil, "")
		if resp.StatusCode != 200 || len(b) == 0 {
			t.Fatalf("%s: %d", p, resp.StatusCode)
		}
	}
	if resp, b := ts.do("GET", "/", nil, ""); !bytes.Contains(b, []byte("<title>vdpp</title>")) || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("page: %s", resp.Header.Get("Content-Type"))
	}
	if resp, _ := ts.do("GET", "/web/nothing.js", nil, ""); resp.StatusCode != 404 {
		t.Fatalf("missing asset: %d", resp.StatusCode)
	}
}
