package main

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vdpp/vdpp/internal/wait"
)

// TestServeBinaryWanPrompt: the real binary serves the built-in Wan (its text encoder: the
// coordinator loads it, with its load progress on stderr): a native job with prompt and
// negative_prompt parts and an OpenAI create with a prompt only (no input_reference)
// complete; an image part, a missing prompt or an empty one is a 400 on both APIs.
func TestServeBinaryWanPrompt(t *testing.T) {
	t.Parallel()
	sp := startServe(t, serveOptions{}, "--model", "builtin-wan", "--backend", "go", "--nproc", "2")
	url, stderr := sp.url, sp.stderr

	type status struct {
		ID    string `json:"id"`
		State string `json:"state"`
		Error string `json:"error"`
	}
	waitJob := func(id string) {
		st := status{ID: id}
		wait.For(time.Minute, func() bool {
			r, err := http.Get(url + "/v1/videos/" + id)
			if err != nil {
				t.Fatal(err)
			}
			json.NewDecoder(r.Body).Decode(&st)
			r.Body.Close()
			return st.State == "succeeded" || st.State == "failed" || st.State == "cancelled"
		})
		if st.State != "succeeded" {
			t.Fatalf("job %s: %s %s\n%s", id, st.State, st.Error, stderr.String())
		}
	}
	native := func(parts map[string]string) (int, status) {
		var body bytes.Buffer
		mw := multipart.NewWriter(&body)
		for k, v := range parts {
			fw, _ := mw.CreateFormField(k)
			fw.Write([]byte(v))
		}
		mw.Close()
		resp, err := http.Post(url+"/v1/videos", mw.FormDataContentType(), &body)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		var st status
		if json.Unmarshal(data, &st); st.Error == "" && resp.StatusCode != http.StatusAccepted {
			st.Error = string(data)
		}
		return resp.StatusCode, st
	}
	params := `{"num_frames":5,"steps":2,"height":32,"width":32,"seed":3}`
	code, st := native(map[string]string{"params": params, "prompt": "a red fox in the snow", "negative_prompt": "blurry"})
	if code != http.StatusAccepted {
		t.Fatalf("native submit: %d %+v", code, st)
	}
	waitJob(st.ID)
	if code, st := native(map[string]string{"params": params}); code != http.StatusBadRequest || !strings.Contains(st.Error, "no prompt part") {
		t.Errorf("no prompt: %d %+v", code, st)
	}
	if code, st := native(map[string]string{"params": params, "prompt": "  "}); code != http.StatusBadRequest || !strings.Contains(st.Error, "prompt part is empty") {
		t.Errorf("an empty prompt on the native API: %d %+v", code, st)
	}
	// A long video: 17 frames (5 latent frames) in windows of 9 frames (3 latent frames)
	// sharing 4 (1 latent frame), stepped by the workers window by window.
	long := `{"num_frames":17,"window":9,"overlap":4,"blend":"linear","steps":2,"height":32,"width":32,"seed":3}`
	if code, st = native(map[string]string{"params": long, "prompt": "a red fox in the snow"}); code != http.StatusAccepted {
		t.Fatalf("long video submit: %d %+v", code, st)
	}
	waitJob(st.ID)
	bad := `{"num_frames":17,"window":10,"steps":2,"height":32,"width":32}`
	if code, st := native(map[string]string{"params": bad, "prompt": "a fox"}); code != http.StatusBadRequest ||
		!strings.Contains(st.Error, "window 10: the model's causal VAE compresses time by 4, so a window takes 1 + 4k frames") {
		t.Errorf("window off the latent grid: %d %+v", code, st)
	}

	resp, err := http.Post(url+"/v1/videos", "application/json",
		strings.NewReader(`{"prompt":"a red fox in the snow","size":"32x32","num_frames":5,"num_inference_steps":2,"guidance_scale":3}`))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var v struct {
		ID string `json:"id"`
	}
	json.Unmarshal(data, &v)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(v.ID, "video_") {
		t.Fatalf("openai create: %d %s", resp.StatusCode, data)
	}
	waitJob(strings.TrimPrefix(v.ID, "video_"))
	resp, err = http.Post(url+"/v1/videos", "application/json", strings.NewReader(`{"size":"32x32"}`))
	if err != nil {
		t.Fatal(err)
	}
	data, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(data), "prompt is required") {
		t.Errorf("openai without prompt: %d %s", resp.StatusCode, data)
	}

	if err := sp.stop(20 * time.Second); err != nil {
		t.Fatalf("server exit: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "component=text_encoder percent=100") {
		t.Errorf("no text encoder load progress:\n%s", stderr.String())
	}
}
