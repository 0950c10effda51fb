package serve

import (
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/serve/job"
)

// fitDefaults shrinks the length first, then the size (aspect kept, multiples of the size
// factor), then the steps, and returns the first that fits, with why.
func TestFitDefaults(t *testing.T) {
	wan := family.Description{FrameMultiple: 4, SizeMultiple: 16}
	native := job.Params{Width: 832, Height: 480, NumFrames: 81, Steps: 50}
	for _, c := range []struct {
		name string
		fits func(job.Params) bool
		want job.Params
	}{
		{"the native job fits", func(job.Params) bool { return true }, native},
		{"a shorter video fits", func(p job.Params) bool { return p.NumFrames <= 21 }, job.Params{Width: 832, Height: 480, NumFrames: 17, Steps: 50}},
		{"a smaller frame too", func(p job.Params) bool { return p.Width*p.Height*p.NumFrames <= 512*512*5 },
			job.Params{Width: 624, Height: 352, NumFrames: 5, Steps: 50}},
		{"fewer steps", func(p job.Params) bool { return p.Steps <= 10 && p.Width <= 16 }, job.Params{Width: 16, Height: 16, NumFrames: 5, Steps: 6}},
		{"nothing fits", func(job.Params) bool { return false }, native},
	} {
		got, why := fitDefaults(native, wan, func(p job.Params) string {
			if c.fits(p) {
				return ""
			}
			return "too big"
		})
		if !reflect.DeepEqual(got, c.want) || reflect.DeepEqual(got, native) != (why == "") || (why != "" && !strings.Contains(why, "832x480, 81 frames, 50 steps would not fit: too big")) {
			t.Errorf("%s: %dx%d %d frames %d steps %q, want %dx%d %d frames %d steps", c.name, got.Width, got.Height, got.NumFrames, got.Steps, why,
				c.want.Width, c.want.Height, c.want.NumFrames, c.want.Steps)
		}
	}
}

// budgetModel is the synthetic model whose steps are predicted to take perUnit seconds a
// unit of work (the stall watchdog's prior), as a large checkpoint's on a CPU.
type budgetModel struct {
	*Model
	perUnit float64
}

func (m budgetModel) StepSecondsPerUnit() float64 { return m.perUnit }

// The first-day check: a web page or an OpenAI create with only a prompt got the model's
// GPU-sized defaults and was always refused on a CPU server. A job that leaves its size,
// length and steps out gets the largest this server can run within its memory and time
// budget, said in /v1/limits; such a create is admitted and runs.
func TestDefaultsFitTheHost(t *testing.T) {
	ts := startServer(t, Config{NProc: 1, DefaultBudget: time.Second, model: budgetModel{syntheticModel(t), 2e-3}})
	lim := ts.modelLimits()
	d := lim.Defaults
	if lim.DefaultsWhy == "" || !strings.Contains(lim.DefaultsWhy, "--default-budget 1s") ||
		d.Width*d.Height*d.NumFrames >= 64*64*14 || lim.NativeWidth != 64 || lim.NativeFrames != 14 {
		t.Fatalf("limits: defaults %+v, why %q (native %dx%d, %d frames)", d, lim.DefaultsWhy, lim.NativeWidth, lim.NativeHeight, lim.NativeFrames)
	}
	for _, k := range lim.Knobs {
		if k.Name == "num_frames" && fmt.Sprint(k.Default) != fmt.Sprint(d.NumFrames) {
			t.Errorf("the page's num_frames default %v, the server's %d", k.Default, d.NumFrames)
		}
	}
	v := ts.oaCreate(testPNG(t, 12), "prompt", "a cat")
	st := ts.status(strings.TrimPrefix(v.ID, "video_"))
	if st.Params.Width != d.Width || st.Params.Height != d.Height || st.Params.NumFrames != d.NumFrames || st.Params.Steps != d.Steps {
		t.Fatalf("a create with only a prompt ran %+v, want the server's defaults %+v", st.Params, d)
	}
	if end := ts.wait(st.ID, 30*time.Second); end.State != job.StateSucceeded {
		t.Fatalf("the default job: %+v", end)
	}
	// The model's own job is still there for a client who asks for it.
	body, ct := multipartBody(t, testPNG(t, 12), `{"num_frames":14,"height":64,"width":64,"steps":25}`)
	if resp, b := ts.do("POST", "/v1/videos", body, ct); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("the native job: %d %s", resp.StatusCode, b)
	}
}
