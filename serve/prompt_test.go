package serve

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/sched"
)

// textSynthetic is the synthetic model posing as a text-to-video model: a prompt of n
// bytes conditions as an image of n+1 pixels.
type textSynthetic struct{ *Model }

func (textSynthetic) TextConditioned() bool { return true }
func (g textSynthetic) Prepare(ctx context.Context, in family.Input, p Params, sc sched.Scheduler) (*Sample, error) {
	if in.Prompt == nil || in.Image != nil {
		return nil, fmt.Errorf("%w: a text model takes a prompt only", ErrBadParams)
	}
	in.Image, in.Prompt = image.NewGray(image.Rect(0, 0, len(in.Prompt.Text)+1, 1)), nil
	return g.Model.Prepare(ctx, in, p, sc)
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
	text := &Server{gen: textSynthetic{syntheticModel(t)}, cfg: Config{Limits: DefaultLimits()}}
	img := &Server{gen: syntheticModel(t), cfg: Config{Limits: DefaultLimits()}}
	_, _, pr, err := text.readUpload(uploadRequest(t, map[string]string{"prompt": "a fox", "negative_prompt": "blur", "params": `{"steps":2}`}))
	if err != nil || pr == nil || pr.Text != "a fox" || pr.Negative != "blur" {
		t.Fatalf("prompt upload: %+v, %v", pr, err)
	}
	_, _, pr, err = text.readUpload(uploadRequest(t, map[string]string{"prompt": "a fox"}))
	if err != nil || pr == nil || pr.Negative != "" {
		t.Fatalf("prompt without negative: %+v, %v", pr, err)
	}
	for name, c := range map[string]struct {
		s     *Server
		parts map[string]string
	}{
		"no prompt":         {text, map[string]string{"params": `{}`}},
		"image to text":     {text, map[string]string{"prompt": "x", "image": "PNG"}},
		"two prompts":       {text, map[string]string{"prompt": "x", "negative_prompt": "y", "params": `{"x":1}`}},
		"prompt to image":   {img, map[string]string{"prompt": "x", "params": `{}`}},
		"negative to image": {img, map[string]string{"negative_prompt": "x"}},
	} {
		if _, _, _, err := c.s.readUpload(uploadRequest(t, c.parts)); !errors.Is(err, ErrBadParams) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// FuzzReadUpload: arbitrary multipart bodies to the native parser of a text and an image
// model, and the router's test: an error or a valid result, never a panic.
func FuzzReadUpload(f *testing.F) {
	f.Add([]byte("--x\r\nContent-Disposition: form-data; name=\"prompt\"\r\n\r\na fox\r\n--x--\r\n"), "x")
	f.Add([]byte("--x\r\nContent-Disposition: form-data; name=\"params\"\r\n\r\n{}\r\n--x\r\nContent-Disposition: form-data; name=\"negative_prompt\"\r\n\r\n\r\n--x--\r\n"), "x")
	f.Fuzz(func(t *testing.T, body []byte, boundary string) {
		multipartHasOpenAIField(body, boundary)
		for _, g := range []generator{textSynthetic{syntheticModel(t)}, syntheticModel(t)} {
			s := &Server{gen: g, cfg: Config{Limits: DefaultLimits()}}
			r := httptest.NewRequest(http.MethodPost, "/v1/videos", bytes.NewReader(body))
			r.Header.Set("Content-Type", "multipart/form-data; boundary="+boundary)
			p, img, pr, err := s.readUpload(r)
			if err != nil {
				continue
			}
			if (pr != nil) == (img != nil) || (pr != nil) != g.TextConditioned() {
				t.Fatalf("prompt %v and image %d bytes for %T", pr, len(img), g)
			}
			if verr := p.Validate(s.cfg.Limits); verr != nil {
				t.Fatalf("invalid params %+v: %v", p, verr)
			}
		}
	})
}

// The served model's limits say what a job gives it (the web page shows the fields that
// fit): a prompt for a text-to-video model, an image otherwise.
func TestModelLimitsInput(t *testing.T) {
	for gen, want := range map[generator]string{textSynthetic{syntheticModel(t)}: InputText, syntheticModel(t): InputImage} {
		s := &Server{gen: gen, cfg: Config{Limits: DefaultLimits()}}
		if got := s.modelLimits().Input; got != want {
			t.Errorf("%T: input %q, want %q", gen, got, want)
		}
		if got := s.modelObject("m").Limits.Input; got != want {
			t.Errorf("%T: GET /v1/models input %q, want %q", gen, got, want)
		}
	}
}
