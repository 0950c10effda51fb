package main

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vdpp/vdpp/model/wan/wantest"
)

// TestServeBinaryWanI2V: the real binary serves Wan image-to-video folders on vdpp's
// native API: a first-last-frame model (the reference FLF2V folder with the tiny text
// encoder) runs a job of image, last_image and prompt parts (the worker reads both images
// from the store); a job without the last image, without the image, or with a last image
// for a model that takes none is a 400 naming the part; GET /v1/limits says what the model
// takes.
func TestServeBinaryWanI2V(t *testing.T) {
	t.Parallel()
	dir := wantest.I2VPromptFolder(t, "wan21-flf2v")
	cd := filepath.Join(wantest.I2VFolder("wan21-flf2v"), "cases", "flf2v_pipeline")
	img, err := os.ReadFile(filepath.Join(cd, "image.png"))
	if err != nil {
		t.Fatal(err)
	}
	last, err := os.ReadFile(filepath.Join(cd, "last_image.png"))
	if err != nil {
		t.Fatal(err)
	}
	sp := startServe(t, serveOptions{}, "--model", dir, "--backend", "go", "--nproc", "1")
	url := sp.url

	var lim struct {
		Input, Image, LastImage string
		Inputs                  []struct{ Name, Need, OpenAI string }
	}
	r, err := http.Get(url + "/v1/limits")
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(r.Body).Decode(&struct {
		Input     *string `json:"input"`
		Image     *string `json:"image"`
		LastImage *string `json:"last_image"`
		Inputs    any     `json:"inputs"`
	}{&lim.Input, &lim.Image, &lim.LastImage, &lim.Inputs})
	r.Body.Close()
	if lim.Input != "text" || lim.Image != "required" || lim.LastImage != "required" {
		t.Fatalf("limits say %+v, want a text model taking an image and a last image", lim)
	}
	// The inputs as the knob table declares them: the page and the OpenAI create read them.
	needs := map[string]string{}
	for _, in := range lim.Inputs {
		needs[in.Name] = in.Need
	}
	if want := map[string]string{"image": "required", "last_image": "required", "prompt": "required", "negative_prompt": "optional"}; !reflect.DeepEqual(needs, want) {
		t.Fatalf("limits' inputs %+v, want %v", lim.Inputs, want)
	}

	type status struct {
		ID    string `json:"id"`
		State string `json:"state"`
		Error string `json:"error"`
	}
	submit := func(parts map[string]string, files map[string][]byte) (int, status) {
		var body bytes.Buffer
		mw := multipart.NewWriter(&body)
		for k, v := range parts {
			fw, _ := mw.CreateFormField(k)
			fw.Write([]byte(v))
		}
		for k, v := range files {
			fw, _ := mw.CreateFormFile(k, k+".png")
			fw.Write(v)
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
	code, st := submit(map[string]string{"params": params, "prompt": "a door opens"}, map[string][]byte{"image": img, "last_image": last})
	if code != http.StatusAccepted {
		t.Fatalf("submit: %d %+v", code, st)
	}
	if end := sp.wait(st.ID, time.Minute); end.State != "succeeded" {
		t.Fatalf("job %s: %s %s\n%s", st.ID, end.State, end.Error, sp.stderr.String())
	}
	for _, c := range []struct {
		files map[string][]byte
		want  string
	}{
		{map[string][]byte{"image": img}, "no last_image part"},
		{map[string][]byte{"last_image": last}, "no image part"},
	} {
		if code, st := submit(map[string]string{"params": params, "prompt": "x"}, c.files); code != http.StatusBadRequest || !strings.Contains(st.Error, c.want) {
			t.Errorf("%v: %d %+v, want a 400 with %q", c.want, code, st, c.want)
		}
	}
}
