package httpapi

import (
	"bytes"
	"errors"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/knob"
	"github.com/vdpp/vdpp/serve/job"
	"github.com/vdpp/vdpp/video"
)

// testDefaults are the defaults of testModel's jobs.
var testDefaults = job.Params{NumFrames: 14, Steps: 25, Height: 64, Width: 64, MinGuidance: 1, MaxGuidance: 3, FPS: 7}

// testModel parses parameters over testDefaults; text says it is text-to-video, image and
// last what images it takes (a Wan image-to-video model takes text and images).
type testModel struct {
	text        bool
	image, last family.Need
}

func (m testModel) ParseParams(data []byte, lim job.Limits) (job.Params, error) {
	return job.ParseJob(data, m.Description(), nil, nil, lim)
}
func (m testModel) ResolveParams(p job.Params, given knob.Given, lim job.Limits) (job.Params, error) {
	return job.Resolve(p, given, m.Description(), nil, lim)
}
func (m testModel) Unknown(string) string { return "" }
func (m testModel) Description() family.Description {
	d := family.Description{Defaults: family.Params(testDefaults), SizeMultiple: 8, Image: m.image, LastImage: m.last, Knobs: knob.Common()}
	if m.text {
		d.TextDim = 32
	}
	return d
}
func (m testModel) TextConditioned() bool { return m.text }

// testBackend answers the model's questions; anything else panics (nil Backend).
type testBackend struct {
	Backend
	m testModel
}

func (b testBackend) Model() Model { return b.m }
func (b testBackend) ImageSize(data []byte) (int, int, error) {
	if !bytes.HasPrefix(data, []byte("\x89PNG")) {
		return 0, 0, video.ErrNotImage
	}
	return 64, 64, nil
}
func (b testBackend) CheckImage(data []byte, _ job.Params) (int64, error) {
	_, _, err := b.ImageSize(data)
	return 64 * 64, err
}
func (b testBackend) CheckCost(job.Params) error { return nil }

// testAPI is the HTTP layer of a text or an image model.
func testAPI(text bool) *API {
	return New(Config{Backend: testBackend{m: testModel{text: text}}, Limits: job.DefaultLimits()})
}

func uploadRequest(t testing.TB, parts map[string]string) *http.Request {
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for k, v := range parts {
		fw, _ := mw.CreateFormField(k)
		fw.Write([]byte(v))
	}
	mw.Close()
	r := httptest.NewRequest(http.MethodPost, "/v1/videos", &body)
	r.Header.Set("Content-Type", mw.FormDataContentType())
	return r
}

// A native upload to a text-to-video model takes prompt and negative_prompt parts and no
// image; an image-conditioned model refuses prompt parts; both bodies route to the native
// submit when they have a params part.
func TestReadUploadPrompt(t *testing.T) {
	text := testAPI(true)
	img := testAPI(false)
	_, in, err := text.readUpload(uploadRequest(t, map[string]string{"prompt": "a fox", "negative_prompt": "blur", "params": `{"steps":2}`}))
	if pr := in.Prompt; err != nil || pr == nil || pr.Text != "a fox" || pr.Negative != "blur" {
		t.Fatalf("prompt upload: %+v, %v", in, err)
	}
	_, in, err = text.readUpload(uploadRequest(t, map[string]string{"prompt": "a fox"}))
	if pr := in.Prompt; err != nil || pr == nil || pr.Negative != "" {
		t.Fatalf("prompt without negative: %+v, %v", in, err)
	}
	for name, c := range map[string]struct {
		s     *API
		parts map[string]string
	}{
		"no prompt":         {text, map[string]string{"params": `{}`}},
		"empty prompt":      {text, map[string]string{"prompt": " \n", "params": `{}`}},
		"image to text":     {text, map[string]string{"prompt": "x", "image": "PNG"}},
		"two prompts":       {text, map[string]string{"prompt": "x", "negative_prompt": "y", "params": `{"x":1}`}},
		"prompt to image":   {img, map[string]string{"prompt": "x", "params": `{}`}},
		"negative to image": {img, map[string]string{"negative_prompt": "x"}},
	} {
		if _, _, err := c.s.readUpload(uploadRequest(t, c.parts)); !errors.Is(err, job.ErrBadParams) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// FuzzReadUpload: arbitrary multipart bodies to the native parser of a text and an image
// model: an error or a valid result, never a panic.
func FuzzReadUpload(f *testing.F) {
	f.Add([]byte("--x\r\nContent-Disposition: form-data; name=\"prompt\"\r\n\r\na fox\r\n--x--\r\n"), "x")
	f.Add([]byte("--x\r\nContent-Disposition: form-data; name=\"params\"\r\n\r\n{}\r\n--x\r\nContent-Disposition: form-data; name=\"negative_prompt\"\r\n\r\n\r\n--x--\r\n"), "x")
	f.Fuzz(func(t *testing.T, body []byte, boundary string) {
		for _, text := range []bool{true, false} {
			s := testAPI(text)
			r := httptest.NewRequest(http.MethodPost, "/v1/videos", bytes.NewReader(body))
			r.Header.Set("Content-Type", "multipart/form-data; boundary="+boundary)
			p, in, err := s.readUpload(r)
			if err != nil {
				continue
			}
			if (in.Prompt != nil) == (in.Image != nil) || (in.Prompt != nil) != text {
				t.Fatalf("prompt %v and image %d bytes for a text model %v", in.Prompt, len(in.Image), text)
			}
			if verr := p.CheckLimits(s.cfg.Limits, nil); verr != nil {
				t.Fatalf("invalid params %+v: %v", p, verr)
			}
		}
	})
}

// A model that takes a prompt and images (Wan image-to-video) takes image, last_image and
// prompt parts; a part it needs is required and one it takes none of refused, each a 400
// naming the part.
func TestReadUploadImageAndPrompt(t *testing.T) {
	png := "\x89PNG fake"
	i2v := New(Config{Backend: testBackend{m: testModel{text: true, image: family.NeedRequired}}, Limits: job.DefaultLimits()})
	flf := New(Config{Backend: testBackend{m: testModel{text: true, image: family.NeedRequired, last: family.NeedRequired}}, Limits: job.DefaultLimits()})
	_, in, err := flf.readUpload(uploadRequest(t, map[string]string{"prompt": "a door opens", "image": png, "last_image": png}))
	if err != nil || in.Prompt == nil || string(in.Image) != png || string(in.LastImage) != png {
		t.Fatalf("image, last image and prompt: %+v, %v", in, err)
	}
	for _, c := range []struct {
		s     *API
		parts map[string]string
		want  string
	}{
		{i2v, map[string]string{"prompt": "x"}, "no image part: the model is image-to-video with a prompt"},
		{i2v, map[string]string{"prompt": "x", "image": png, "last_image": png}, "a last_image part: the model takes none"},
		{flf, map[string]string{"prompt": "x", "image": png}, "no last_image part"},
		{i2v, map[string]string{"image": png}, "no prompt part"},
		{flf, map[string]string{"prompt": "x", "image": png, "last_image": "not an image"}, "last_image part"},
		{testAPI(true), map[string]string{"prompt": "x", "image": png}, "an image part: the model is text-to-video"},
	} {
		_, _, err := c.s.readUpload(uploadRequest(t, c.parts))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.parts, err, c.want)
		}
	}
}
