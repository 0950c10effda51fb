package serve

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vdpp/vdpp/serve/job"
	"github.com/vdpp/vdpp/tensor"
)

// A job longer than the model's native length (the synthetic model's 14 frames) gets the
// model's windows, or its own; bad windows are one ErrBadParams line each; a job of one
// window keeps the window fields zero.
func TestParseJobParamsWindows(t *testing.T) {
	for _, c := range []struct {
		js              string
		window, overlap int
		blend, wantErr  string
	}{
		{`{"num_frames": 20}`, 14, 3, "cosine", ""},
		{`{"num_frames": 20, "window": 8}`, 8, 2, "cosine", ""},
		{`{"num_frames": 20, "window": 8, "overlap": 0, "blend": "linear"}`, 8, 0, "linear", ""},
		{`{"num_frames": 14, "window": 14, "overlap": 3}`, 0, 0, "", ""},
		{`{"num_frames": 20, "window": 8, "overlap": 8}`, 0, 0, "", "overlap 8 must be shorter than window 8"},
		{`{"num_frames": 25, "window": 20}`, 0, 0, "", "window 20 is longer than the model's 14 frames"},
		{`{"num_frames": 6, "window": 8}`, 0, 0, "", "num_frames 6 is fewer than one window of 8"},
		{`{"num_frames": 20, "blend": "step"}`, 0, 0, "", `blend "step" must be one of cosine, linear`},
		{`{"num_frames": 20, "window": -2}`, 0, 0, "", "window -2 must be in [1, 1048576]"},
		{`{"num_frames": 20, "window": 0}`, 0, 0, "", "window 0 must be in [1, 1048576]"},
	} {
		p, err := syntheticModel(t).ParseParams([]byte(c.js), job.DefaultLimits())
		if c.wantErr != "" {
			if !errors.Is(err, job.ErrBadParams) || !strings.Contains(err.Error(), c.wantErr) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%s: %v, want one ErrBadParams line with %q", c.js, err, c.wantErr)
			}
			continue
		}
		if err != nil || p.Window != c.window || p.Overlap != c.overlap || p.Blend != c.blend {
			t.Errorf("%s: window %d overlap %d blend %q, %v; want %d %d %q", c.js, p.Window, p.Overlap, p.Blend, err, c.window, c.overlap, c.blend)
		}
	}
}

// A windowed job's step memory is one window's, whatever its length; its work counts every
// window's frames.
func TestJobCostWindows(t *testing.T) {
	m := syntheticModel(t)
	act := m.Activation()
	native := job.JobCost(m.DefaultParams(), act)
	long := m.DefaultParams()
	long.NumFrames, long.Window, long.Overlap = 140, 14, 4 // windows at 0, 10, ..., 120, 126
	c := job.JobCost(long, act)
	if c.ActivationBytes != native.ActivationBytes {
		t.Errorf("140 frames in windows of 14: step memory %d, want one window's %d", c.ActivationBytes, native.ActivationBytes)
	}
	if want := native.Work * 14; c.Work != want || c.Frames != 140 {
		t.Errorf("work %d frames %d, want %d (14 windows of 14 frames) and 140", c.Work, c.Frames, want)
	}
	plain := long
	plain.Window = 0
	if job.JobCost(plain, act).ActivationBytes != 10*native.ActivationBytes {
		t.Error("a 140-frame job without windows should cost ten native steps of memory")
	}
}

// A long video through the server (2 in-process workers, the synthetic model) equals the
// one-process run of its windows bit for bit; bad windows are a 400 with one message on
// both APIs.
func TestServeLongVideo(t *testing.T) {
	ts := startServer(t, Config{})
	img := testPNG(t, 1)
	const js = `{"num_frames": 24, "window": 8, "overlap": 2, "blend": "linear", "steps": 6, "height": 64, "width": 64, "seed": 3}`
	st := ts.submit(img, js)
	if end := ts.wait(st.ID, 60*time.Second); end.State != job.StateSucceeded {
		t.Fatalf("job %s: %s %s", st.ID, end.State, end.Error)
	}
	p, err := syntheticModel(t).ParseParams([]byte(js), job.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	got := ts.latent(st.ID)
	if !tensor.BitEqual(got, reference(t, img, p)) {
		t.Fatal("the served long video differs from the one-process run")
	}
	plain := p
	plain.Window, plain.Overlap, plain.Blend = 0, 0, ""
	if tensor.BitEqual(got, reference(t, img, plain)) {
		t.Fatal("the served long video ran without windows")
	}

	body, ct := multipartBody(t, img, `{"num_frames": 24, "window": 8, "overlap": 8}`)
	resp, b := ts.do("POST", "/v1/videos", body, ct)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "overlap 8 must be shorter than window 8") {
		t.Fatalf("native bad overlap: %d %s", resp.StatusCode, b)
	}
	create := `{"model": "synthetic", "prompt": "x", "num_frames": 24, "window": 30, "input_reference": {"image_url": "data:image/png;base64,` +
		base64.StdEncoding.EncodeToString(img) + `"}}`
	resp, b = ts.do("POST", "/v1/videos", strings.NewReader(create), "application/json")
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "window 30 is longer than the model's 14 frames") || !strings.Contains(string(b), `"param": "window"`) {
		t.Fatalf("OpenAI bad window: %d %s", resp.StatusCode, b)
	}
}
