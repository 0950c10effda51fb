package svdtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/generate"
	"github.com/vdpp/vdpp/model/lora"
	"github.com/vdpp/vdpp/model/svd"
	"github.com/vdpp/vdpp/serve"
	"github.com/vdpp/vdpp/serve/job"
	"github.com/vdpp/vdpp/tensor"
)

// copyFile copies src to dst.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// One server, one loaded UNet, jobs with different LoRAs of its --lora-dir (and one with
// none): each job's video is the bytes of `vdpp generate --lora` for the same job, which
// merges the LoRA into the weights at load (the server applies it per call over the
// weights every job shares, with the same bits). A LoRA outside the folder, missing, or
// for another model is refused in one line.
func TestServeLoRAsMatchGenerate(t *testing.T) {
	dir := devDir(t)
	imgBytes, imgPath := inputPNG(t)
	loras := t.TempDir()
	testdata := filepath.Join("..", "..", "model", "lora", "testdata")
	copyFile(t, filepath.Join(testdata, "lora_svd_diffusers", "lora0.safetensors"), filepath.Join(loras, "a.safetensors"))
	copyFile(t, filepath.Join(testdata, "lora_svd_kohya", "lora0.safetensors"), filepath.Join(loras, "b.safetensors"))
	copyFile(t, filepath.Join(testdata, "lora_wan_original", "lora0.safetensors"), filepath.Join(loras, "wan.safetensors"))
	spec := serve.ModelSpec{Name: svd.FamilyName, Dir: dir, LoRADir: loras}
	_, url := startServer(t, spec, 2, job.DefaultLimits())

	base := `"num_frames":2,"height":32,"width":32,"steps":2,"seed":5,"decode_chunk_size":1`
	for _, bad := range []struct{ lora, want string }{
		{`[{"name":"../a.safetensors","strength":1}]`, "name a file of the server's LoRA folder"},
		{`[{"name":"none.safetensors","strength":1}]`, "no such file in the server's LoRA folder"},
		{`[{"name":"wan.safetensors","strength":1}]`, "wan.safetensors: key diffusion_model.blocks.0.cross_attn.k.lora_down.weight (weight diffusion_model.blocks.0.cross_attn.k.weight) matches no weight of the SVD UNet"},
	} {
		code, body := submit(t, url, imgBytes, `{`+base+`,"lora":`+bad.lora+`}`)
		msg := fmt.Sprint(body["error"])
		if code != http.StatusBadRequest || !strings.Contains(msg, bad.want) || strings.Contains(msg, loras) {
			t.Errorf("lora %s: %d %v, want 400 with %q (and not the server's path)", bad.lora, code, body, bad.want)
		}
	}
	jobs := []struct {
		lora  []lora.Spec
		extra string
	}{
		{[]lora.Spec{{Path: "a.safetensors", Strength: 0.9}}, `,"lora":[{"name":"a.safetensors","strength":0.9}]`},
		{[]lora.Spec{{Path: "b.safetensors", Strength: 1.1}, {Path: "a.safetensors", Strength: -0.5}}, `,"lora":[{"name":"b.safetensors","strength":1.1},{"name":"a.safetensors","strength":-0.5}]`},
		{nil, ``},
	}
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		code, body := submit(t, url, imgBytes, `{`+base+j.extra+`}`)
		if code != http.StatusAccepted {
			t.Fatalf("submit %d: %d %v", i, code, body)
		}
		ids[i], _ = body["id"].(string)
	}
	var lats []*tensor.Dense
	for i, id := range ids {
		st := waitDone(t, url, id, 2*time.Minute)
		if st.State != job.StateSucceeded {
			t.Fatalf("job %d: %s: %s", i, st.State, st.Error)
		}
		lats = append(lats, latent(t, url, id))
	}
	for i := range lats {
		for k := i + 1; k < len(lats); k++ {
			if tensor.BitEqual(lats[i], lats[k]) {
				t.Fatalf("jobs %d and %d (different LoRAs) give the same latent", i, k)
			}
		}
	}
	for i, j := range jobs {
		o := generate.DefaultOptions()
		o.Model, o.Image, o.Out = dir, imgPath, t.TempDir()
		o.NumFrames, o.Steps, o.Height, o.Width, o.Seed, o.DecodeChunkSize = 2, 2, 32, 32, 5, 1
		for _, s := range j.lora {
			o.LoRA = append(o.LoRA, lora.Spec{Path: filepath.Join(loras, s.Path), Strength: s.Strength})
		}
		if err := generate.RunRank(context.Background(), o, comm.SingleProcess(), slog.New(slog.DiscardHandler)); err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join(o.Out, "sample-000", "video.gif"))
		if err != nil {
			t.Fatal(err)
		}
		code, _, gif := get(t, url+"/v1/videos/"+ids[i]+"/content?format=gif")
		if code != http.StatusOK || !bytes.Equal(gif, want) {
			t.Errorf("job %d: served GIF (%d, %d bytes) differs from vdpp generate --lora's (%d bytes)", i, code, len(gif), len(want))
		}
	}
	code, _, raw := get(t, url+"/v1/limits")
	var lim job.ModelLimits
	if err := json.Unmarshal(raw, &lim); code != http.StatusOK || err != nil || strings.Join(lim.LoRAs, " ") != "a.safetensors b.safetensors wan.safetensors" {
		t.Errorf("limits: %d %v %s", code, err, raw)
	}
}
