package svdtest_test

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
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vdpp/vdpp/internal/shared"
	"github.com/vdpp/vdpp/internal/wait"
	"github.com/vdpp/vdpp/serve"
	"github.com/vdpp/vdpp/serve/job"
	"github.com/vdpp/vdpp/tensor"
)

// devDir returns the golden dev checkpoint (skipped outside CI when absent).
func devDir(t testing.TB) string {
	t.Helper()
	return shared.Require(t, "golden", "dev")
}

// inputPNG writes a small non-square PNG (so both resizes do real work) and returns its bytes
// and path.
func inputPNG(t testing.TB) ([]byte, string) {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, 48, 40))
	for y := 0; y < 40; y++ {
		for x := 0; x < 48; x++ {
			img.Set(x, y, color.NRGBA{uint8(5 * x), uint8(6 * y), uint8(x * y), 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "in.png")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), path
}

// startServer runs `vdpp serve --model DIR` with in-process worker ranks, ready.
func startServer(t testing.TB, spec serve.ModelSpec, nproc int, lim job.Limits) (*serve.Server, string) {
	t.Helper()
	srv, err := serve.New(serve.Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), Spec: spec, NProc: nproc, Limits: lim,
		MaxRestarts: 2, Launcher: serve.InProcLauncher{Spec: spec}, HeartbeatTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		srv.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.WaitReady(ctx); err != nil {
		t.Fatalf("workers never joined: %v", err)
	}
	return srv, "http://" + srv.Addr()
}

// submit posts a job and returns the HTTP status and the decoded JSON body.
func submit(t testing.TB, url string, img []byte, params string) (int, map[string]any) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, _ := mw.CreateFormField("params")
	fw.Write([]byte(params))
	fw, _ = mw.CreateFormFile("image", "in.png")
	fw.Write(img)
	mw.Close()
	resp, err := http.Post(url+"/v1/videos", mw.FormDataContentType(), &buf)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("status %d: body is not JSON: %v", resp.StatusCode, err)
	}
	return resp.StatusCode, body
}

// get fetches path and returns status, content type and body.
func get(t testing.TB, url string) (int, http.Header, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// waitDone polls a job until it ends and returns its final status.
func waitDone(t testing.TB, url, id string, timeout time.Duration) job.Status {
	t.Helper()
	var st job.Status
	if !wait.For(timeout, func() bool {
		code, _, b := get(t, url+"/v1/videos/"+id)
		if code != http.StatusOK {
			t.Fatalf("status of %s: %d %s", id, code, b)
		}
		st = job.Status{}
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatal(err)
		}
		return st.State.Final()
	}) {
		t.Fatalf("job %s still %s after %v", id, st.State, timeout)
	}
	return st
}

// latent downloads a finished job's final latent.
func latent(t testing.TB, url, id string) *tensor.Dense {
	t.Helper()
	code, hdr, b := get(t, url+"/v1/videos/"+id+"/content?format=latent")
	if code != http.StatusOK {
		t.Fatalf("latent: %d %s", code, b)
	}
	var shape []int
	for _, s := range strings.Split(hdr.Get("X-Latent-Shape"), ",") {
		d, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("X-Latent-Shape %q: %v", hdr.Get("X-Latent-Shape"), err)
		}
		shape = append(shape, d)
	}
	lat, err := serve.DecodeLatent(b, shape)
	if err != nil {
		t.Fatal(err)
	}
	return lat
}

func firstDiff(a, b []float32) string {
	for i := range a {
		if a[i] != b[i] {
			return fmt.Sprintf("element %d: %v != %v", i, a[i], b[i])
		}
	}
	return "none"
}

func itoa(i int) string { return strconv.Itoa(i) }

func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
