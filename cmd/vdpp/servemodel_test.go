package main

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"testing"
	"time"

	"github.com/vdpp/vdpp/internal/shared"
	"github.com/vdpp/vdpp/internal/wait"
	"github.com/vdpp/vdpp/serve/loadtest"
)

// TestServeBinarySVD: the real binary serves a checkpoint with worker processes (the
// folder, --variant and --backend reach `vdpp worker serve`): a small job completes and
// downloads as a GIF.
func TestServeBinarySVD(t *testing.T) {
	t.Parallel()
	ckpt := shared.Require(t, "golden", "dev")
	sp := startServe(t, serveOptions{}, "--model", ckpt, "--variant", "fp16", "--backend", "go", "--nproc", "2")
	url, stderr := sp.url, sp.stderr

	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, _ := mw.CreateFormField("params")
	fw.Write([]byte(`{"num_frames":1,"steps":2,"height":16,"width":16,"max_guidance":1,"seed":3}`))
	fw, _ = mw.CreateFormFile("image", "a.png")
	fw.Write(loadtest.TestImage(3))
	mw.Close()
	resp, err := http.Post(url+"/v1/videos", mw.FormDataContentType(), &body)
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		ID    string `json:"id"`
		State string `json:"state"`
		Error string `json:"error"`
	}
	json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("submit: %d %+v\n%s", resp.StatusCode, st, stderr.String())
	}
	wait.For(time.Minute, func() bool {
		r, err := http.Get(url + "/v1/videos/" + st.ID)
		if err != nil {
			t.Fatal(err)
		}
		json.NewDecoder(r.Body).Decode(&st)
		r.Body.Close()
		return st.State == "succeeded" || st.State == "failed" || st.State == "cancelled"
	})
	if st.State != "succeeded" {
		t.Fatalf("job %s: %s %s\n%s", st.ID, st.State, st.Error, stderr.String())
	}
	r, err := http.Get(url + "/v1/videos/" + st.ID + "/content?format=gif")
	if err != nil {
		t.Fatal(err)
	}
	gif, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != http.StatusOK || !bytes.HasPrefix(gif, []byte("GIF89a")) {
		t.Fatalf("gif: %d, %d bytes", r.StatusCode, len(gif))
	}
	if err := sp.stop(20 * time.Second); err != nil {
		t.Fatalf("server exit: %v\n%s", err, stderr.String())
	}
}
