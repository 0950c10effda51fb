package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vdpp/vdpp/internal/shared"
	"github.com/vdpp/vdpp/model/checkpoint"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/serve/loadtest"
)

// TestModelSpec: --model maps a folder and "builtin" to the family its model_index.json
// names, with that folder; names to themselves; a folder no family claims, or without a
// readable model_index.json, and "builtin" without a built-in model to a clear error.
func TestModelSpec(t *testing.T) {
	dir := t.TempDir()
	builtinDir := t.TempDir()
	tuned, corrupt := t.TempDir(), t.TempDir()
	unreadable, foreign := t.TempDir(), t.TempDir()
	for d, class := range map[string]string{dir: "StableVideoDiffusionPipeline", builtinDir: "StableVideoDiffusionPipeline",
		tuned: "StableVideoDiffusionPipeline", corrupt: "StableVideoDiffusionPipeline", foreign: "SomeOtherPipeline"} {
		if err := os.WriteFile(filepath.Join(d, "model_index.json"), []byte(`{"_class_name": "`+class+`"}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for d, text := range map[string]string{tuned: `{"min_guidance": 2, "max_guidance": 4, "decode_chunk_size": 5}`, corrupt: `{"decode_chunk_size": "seven"}`} {
		if err := os.WriteFile(filepath.Join(d, checkpoint.SamplingFile), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name     string
		model    string
		resolver func(string) (string, error)
		wantName string
		wantDir  string
		wantErr  error
	}{
		{"folder", dir, nil, "svd", dir, nil},
		{"relative folder", filepath.Join(dir, "."), nil, "svd", dir, nil},
		{"folder with vdpp_sampling.json", tuned, nil, "svd", tuned, nil},
		{"folder with a corrupt vdpp_sampling.json", corrupt, nil, "", "", checkpoint.ErrSampling},
		{"folder without model_index.json", unreadable, nil, "", "", nil},
		{"folder of a pipeline no family runs", foreign, nil, "", "", family.ErrUnknown},
		{"synthetic", "synthetic", nil, "synthetic", "", nil},
		{"empty", "", nil, "", "", errUsage},
		{"builtin not in this build", "builtin", nil, "", "", errBuiltinUnavailable},
		{"builtin resolved", "builtin", func(string) (string, error) { return builtinDir, nil }, "svd", builtinDir, nil},
		{"builtin resolver fails", "builtin", func(string) (string, error) { return "", errors.New("no weights") }, "", "", nil},
	}
	defer func(r func(string) (string, error)) { resolveBuiltin = r }(resolveBuiltin)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resolveBuiltin = c.resolver
			spec, err := modelSpec(c.model)
			if c.wantName == "" {
				if err == nil || (c.wantErr != nil && !errors.Is(err, c.wantErr)) {
					t.Fatalf("modelSpec(%q) = %+v, %v; want error %v", c.model, spec, err, c.wantErr)
				}
				return
			}
			if err != nil || spec.Name != c.wantName || spec.Dir != c.wantDir {
				t.Fatalf("modelSpec(%q) = %+v, %v; want %s %s", c.model, spec, err, c.wantName, c.wantDir)
			}
		})
	}
	resolveBuiltin = nil
	if _, err := modelSpec("builtin"); err == nil || err.Error() != "serve: builtin model not available in this build" {
		t.Fatalf("builtin error: %v", err)
	}
}

// TestServeBinarySVD: the real binary serves a checkpoint with worker processes (the
// folder, --variant and --backend reach `vdpp worker serve`): a small job completes and
// downloads as a GIF.
func TestServeBinarySVD(t *testing.T) {
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
	for deadline := time.Now().Add(time.Minute); st.State != "succeeded"; time.Sleep(50 * time.Millisecond) {
		if st.State == "failed" || st.State == "cancelled" || time.Now().After(deadline) {
			t.Fatalf("job %s: %s %s\n%s", st.ID, st.State, st.Error, stderr.String())
		}
		r, err := http.Get(url + "/v1/videos/" + st.ID)
		if err != nil {
			t.Fatal(err)
		}
		json.NewDecoder(r.Body).Decode(&st)
		r.Body.Close()
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

// TestServeRefusesTextToVideo: a Wan folder without a text encoder is refused at start with
// one line saying why and naming the missing file.
func TestServeRefusesTextToVideo(t *testing.T) {
	dir := shared.Require(t, "golden", "wan-dev")
	_, err := modelSpec(dir)
	if err == nil || !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "text-to-video model (wan") || !strings.Contains(err.Error(), "text_encoder/config.json is missing") {
		t.Fatalf("modelSpec(wan-dev) error %v", err)
	}
}
