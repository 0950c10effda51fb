package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	_ "github.com/vdpp/vdpp/model/families" // the synthetic model
	bolt "go.etcd.io/bbolt"

	"github.com/vdpp/vdpp/internal/wait"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/serve/job"
	"github.com/vdpp/vdpp/tensor"
)

// apiError is the body of a native error response.
type apiError struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// testPNG returns a small PNG whose colours depend on k.
func testPNG(t testing.TB, k int) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, 8, 6))
	for y := 0; y < 6; y++ {
		for x := 0; x < 8; x++ {
			img.Set(x, y, color.NRGBA{uint8(30*x + k), uint8(40*y + 3*k), uint8(7 * k), 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type testServer struct {
	*Server
	url string
	t   testing.TB
}

// startServer runs a server with in-process workers on 127.0.0.1:0 and waits until ready.
// Each before runs on the server before it starts (where coordinator hooks are set: its
// read loops must not see them change).
func startServer(t testing.TB, cfg Config, before ...func(*Server)) *testServer {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	cfg.Listen = "127.0.0.1:0"
	if cfg.Spec.Name == "" {
		cfg.Spec.Name = "synthetic"
	}
	if cfg.NProc == 0 {
		cfg.NProc = 2
	}
	if cfg.Launcher == nil {
		cfg.Launcher = InProcLauncher{Spec: cfg.Spec}
	}
	if cfg.HeartbeatTimeout == 0 {
		cfg.HeartbeatTimeout = 2 * time.Second
	}
	if cfg.MaxRestarts == 0 {
		cfg.MaxRestarts = 10
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range before {
		f(s)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	ts := &testServer{Server: s, url: "http://" + s.Addr(), t: t}
	t.Cleanup(func() { s.Close() })
	ts.waitReady()
	return ts
}

func (ts *testServer) waitReady() {
	if !wait.For(10*time.Second, func() bool { j, w := ts.coord.Ready(); return j == w }) {
		ts.t.Fatal("workers never joined")
	}
}

// multipartBody builds an upload with the given parts (nil image or params: left out).
func multipartBody(t testing.TB, img []byte, params string) (io.Reader, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	if params != "" {
		fw, _ := mw.CreateFormField("params")
		fw.Write([]byte(params))
	}
	if img != nil {
		fw, _ := mw.CreateFormFile("image", "in.png")
		fw.Write(img)
	}
	mw.Close()
	return &buf, mw.FormDataContentType()
}

func (ts *testServer) do(method, path string, body io.Reader, ctype string, hdr ...string) (*http.Response, []byte) {
	ts.t.Helper()
	req, err := http.NewRequest(method, ts.url+path, body)
	if err != nil {
		ts.t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		ts.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// submit posts a job and returns its status (failing the test unless 202).
func (ts *testServer) submit(img []byte, params string) job.Status {
	ts.t.Helper()
	body, ct := multipartBody(ts.t, img, params)
	resp, b := ts.do("POST", "/v1/videos", body, ct)
	if resp.StatusCode != http.StatusAccepted {
		ts.t.Fatalf("submit: %d %s", resp.StatusCode, b)
	}
	var st job.Status
	if err := json.Unmarshal(b, &st); err != nil {
		ts.t.Fatal(err)
	}
	return st
}

func (ts *testServer) status(id string) job.Status {
	ts.t.Helper()
	resp, b := ts.do("GET", "/v1/videos/"+id, nil, "")
	if resp.StatusCode != http.StatusOK {
		ts.t.Fatalf("status %s: %d %s", id, resp.StatusCode, b)
	}
	var st job.Status
	if err := json.Unmarshal(b, &st); err != nil {
		ts.t.Fatal(err)
	}
	return st
}

// waitStep polls until job id has run step steps (it fails the test after 30 s).
func (ts *testServer) waitStep(id string, step int) {
	ts.t.Helper()
	var st job.Status
	if !wait.For(30*time.Second, func() bool { st = ts.status(id); return st.Progress.Step >= step }) {
		ts.t.Fatalf("job %s still %s at step %d, want step %d", id, st.State, st.Progress.Step, step)
	}
}

// wait polls until the job has ended or the timeout passes.
func (ts *testServer) wait(id string, timeout time.Duration) job.Status {
	ts.t.Helper()
	var st job.Status
	if !wait.For(timeout, func() bool { st = ts.status(id); return st.State.Final() }) {
		ts.t.Fatalf("job %s still %s at step %d/%d", id, st.State, st.Progress.Step, st.Progress.Steps)
	}
	return st
}

// latent downloads a finished job's final latent.
func (ts *testServer) latent(id string) *tensor.Dense {
	ts.t.Helper()
	resp, b := ts.do("GET", "/v1/videos/"+id+"/content?format=latent", nil, "")
	if resp.StatusCode != http.StatusOK {
		ts.t.Fatalf("latent %s: %d %s", id, resp.StatusCode, b)
	}
	var shape []int
	for _, f := range strings.Split(resp.Header.Get("X-Latent-Shape"), ",") {
		var d int
		json.Unmarshal([]byte(f), &d)
		shape = append(shape, d)
	}
	lat, err := DecodeLatent(b, shape)
	if err != nil {
		ts.t.Fatal(err)
	}
	return lat
}

// syntheticModel is the served synthetic model (the coordinator's roles), closed with t.
func syntheticModel(t testing.TB) *Model {
	t.Helper()
	m, err := OpenModel(ModelSpec{Name: "synthetic"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// reference computes the one-process result of a job.
func reference(t testing.TB, img []byte, p job.Params) *tensor.Dense {
	t.Helper()
	m, _, err := image.Decode(bytes.NewReader(img))
	if err != nil {
		t.Fatal(err)
	}
	out, err := Reference(context.Background(), ModelSpec{Name: "synthetic"}, syntheticModel(t), family.Input{Image: m}, p)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// mustParams parses a job's JSON as the synthetic model's server does.
func mustParams(t testing.TB, js string) job.Params {
	t.Helper()
	p, err := syntheticModel(t).ParseParams([]byte(js), job.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mustJSON(t testing.TB, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
}

func containsLine(text, line string) bool {
	for _, l := range strings.Split(text, "\n") {
		if l == line {
			return true
		}
	}
	return false
}

// countLine returns the value of the first sample line starting with name.
func countLine(text, name string) float64 {
	for _, l := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(l, name+" "); ok {
			var v float64
			fmt.Sscan(rest, &v)
			return v
		}
	}
	return -1
}

// All returns the records of the store's index, in submission order.
func (s *jobStore) All() ([]job.Record, error) {
	var out []job.Record
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(jobsBucket).ForEach(func(k, v []byte) error {
			r, err := job.DecodeRecord(v)
			if err != nil {
				return fmt.Errorf("job record %x: %w", k, err)
			}
			out = append(out, r)
			return nil
		})
	})
	return out, err
}
