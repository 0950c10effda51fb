package wanservetest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/generate"
	"github.com/vdpp/vdpp/internal/wait"
	"github.com/vdpp/vdpp/model/lora"
	"github.com/vdpp/vdpp/model/wan"
	"github.com/vdpp/vdpp/model/wan/wantest"
	"github.com/vdpp/vdpp/serve"
	"github.com/vdpp/vdpp/serve/job"
)

// One server, the built-in Wan loaded once, two jobs with different LoRAs of its --lora-dir
// (LoRAs of the released distillation key set, random weights) and one with none: each
// job's GIF is the bytes of `vdpp generate --lora` for the same job (which merges the LoRA
// into the weights at load; the server applies it in every call over the shared weights),
// and the three differ.
func TestServeWanLoRAsMatchGenerate(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("..", "..", "builtin", "wan"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := wan.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := f.TransformerConfig(1)
	if err != nil {
		t.Fatal(err)
	}
	loras := t.TempDir()
	for i, name := range []string{"a.safetensors", "b.safetensors"} {
		if err := wantest.WriteDistillLoRA(filepath.Join(loras, name), cfg, 4, uint64(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	spec := serve.ModelSpec{Name: wan.FamilyName, Dir: dir, LoRADir: loras}
	srv, err := serve.New(serve.Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), Spec: spec, NProc: 1, Limits: job.DefaultLimits(),
		MaxRestarts: 2, Launcher: serve.InProcLauncher{Spec: spec}, HeartbeatTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		srv.Close()
		t.Fatal(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := srv.WaitReady(ctx); err != nil {
		t.Fatalf("workers never joined: %v", err)
	}
	url := "http://" + srv.Addr()

	const prompt = "a red fox in the snow"
	jobs := []struct {
		lora  []lora.Spec
		extra string
	}{
		{[]lora.Spec{{Path: "a.safetensors", Strength: 0.8}}, `,"lora":[{"name":"a.safetensors","strength":0.8}]`},
		{[]lora.Spec{{Path: "b.safetensors", Strength: 1}, {Path: "a.safetensors", Strength: -0.5}}, `,"lora":[{"name":"b.safetensors","strength":1},{"name":"a.safetensors","strength":-0.5}]`},
		{nil, ``},
	}
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		var body bytes.Buffer
		mw := multipart.NewWriter(&body)
		mw.WriteField("params", `{"num_frames":5,"steps":2,"height":32,"width":32,"seed":3`+j.extra+`}`)
		mw.WriteField("prompt", prompt)
		mw.Close()
		resp, err := http.Post(url+"/v1/videos", mw.FormDataContentType(), &body)
		if err != nil {
			t.Fatal(err)
		}
		var st job.Status
		json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("submit %d: %d %+v", i, resp.StatusCode, st)
		}
		ids[i] = st.ID
	}
	gifs := make([][]byte, len(jobs))
	for i, id := range ids {
		var st job.Status
		if !wait.For(2*time.Minute, func() bool {
			st = job.Status{}
			if code, b := get(t, url+"/v1/videos/"+id); code != http.StatusOK || json.Unmarshal(b, &st) != nil {
				t.Fatalf("status of %s: %d %s", id, code, b)
			}
			return st.State.Final()
		}) || st.State != job.StateSucceeded {
			t.Fatalf("job %d: %s: %s", i, st.State, st.Error)
		}
		code, b := get(t, url+"/v1/videos/"+id+"/content?format=gif")
		if code != http.StatusOK {
			t.Fatalf("job %d: GIF: %d %s", i, code, b)
		}
		gifs[i] = b
	}
	for i := range gifs {
		for k := i + 1; k < len(gifs); k++ {
			if bytes.Equal(gifs[i], gifs[k]) {
				t.Fatalf("jobs %d and %d (different LoRAs) give the same video", i, k)
			}
		}
	}
	for i, j := range jobs {
		o := generate.DefaultOptions()
		o.Model, o.Prompt, o.Out = dir, prompt, t.TempDir()
		o.NumFrames, o.Steps, o.Height, o.Width, o.Seed = 5, 2, 32, 32, 3
		for _, s := range j.lora {
			o.LoRA = append(o.LoRA, lora.Spec{Path: filepath.Join(loras, s.Path), Strength: s.Strength})
		}
		o, err := generate.Resolve(o)
		if err != nil {
			t.Fatal(err)
		}
		if err := generate.RunRank(context.Background(), o, comm.SingleProcess(), slog.New(slog.DiscardHandler)); err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join(o.Out, "sample-000", "video.gif"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(gifs[i], want) {
			t.Errorf("job %d: served GIF (%d bytes) differs from vdpp generate --lora's (%d bytes)", i, len(gifs[i]), len(want))
		}
	}
}

// get fetches url and returns the status and body.
func get(t *testing.T, url string) (int, []byte) {
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
	return resp.StatusCode, b
}
