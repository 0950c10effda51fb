package serve

import (
	"bytes"
	"image"
	"image/png"
	"net/http"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/plan"
	"github.com/vdpp/vdpp/serve/job"
)

func TestMemInfoTotal(t *testing.T) {
	for in, want := range map[string]int64{
		"MemTotal:       24576000 kB\nMemFree:         1000 kB\n": 24576000 << 10,
		"MemFree: 1 kB\n":     0,
		"MemTotal: lots kB\n": 0,
		"":                    0,
	} {
		if got := memInfoTotal([]byte(in)); got != want {
			t.Errorf("memInfoTotal(%q) = %d, want %d", in, got, want)
		}
	}
}

// heavyModel is the synthetic model claiming a denoiser of weights bytes.
type heavyModel struct {
	*Model
	weights int64
}

func (m heavyModel) Weights() plan.Weights { return plan.Weights{Denoiser: m.weights} }

// The step memory limit comes from the machine's memory: a job whose step needs more is
// refused 413 with its estimate, the limit and the machine's numbers, on both APIs, and
// nothing is queued; a model whose weights alone do not fit is refused at start.
func TestMemoryAdmission(t *testing.T) {
	const mem = 16 << 20
	// Without the model's multiple-based limits, the machine's is the only one on memory.
	ts := startServer(t, Config{Spec: ModelSpec{Name: "synthetic"}, MaxMemory: mem, CostMultiple: -1})
	limits := ts.modelLimits()
	m := job.Machine{MemoryBytes: mem, Ranks: 2}
	if limits.MaxActivationBytes != m.StepMemory() || limits.Machine != m {
		t.Fatalf("limits %+v, want the machine's step memory %d", limits.CostLimits, m.StepMemory())
	}
	// 2 x 4 bytes x 20 frames x 4 channels x 128 x 128 latent pixels = 10 MiB a step, over
	// the 4.5 MiB a step of 16 MiB may take (85 % of it shared by two ranks and the decoder).
	big := `{"num_frames":20,"steps":2,"height":1024,"width":1024,"max_guidance":3}`
	body, ct := multipartBody(t, testPNG(t, 1), big)
	resp, b := ts.do("POST", "/v1/videos", body, ct)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !bytes.Contains(b, []byte("a step may use on this server")) {
		t.Fatalf("a job over the machine's memory: %d %s", resp.StatusCode, b)
	}
	if n, _ := ts.coord.Counts(); n[job.StateQueued]+n[job.StateRunning] != 0 {
		t.Fatalf("the refused job was queued: %v", n)
	}
	// An image whose decoded memory (900x900 at 8 bytes a pixel: 6.2 MiB) is over the same
	// share is refused from its header alone (the pixels are cut off: decoding them would
	// fail 400), before anything is decoded.
	var huge bytes.Buffer
	if err := png.Encode(&huge, image.NewRGBA64(image.Rect(0, 0, 900, 900))); err != nil {
		t.Fatal(err)
	}
	body, ct = multipartBody(t, huge.Bytes()[:60], `{"num_frames":2,"steps":2,"height":64,"width":64}`)
	resp, b = ts.do("POST", "/v1/videos", body, ct)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !bytes.Contains(b, []byte("6 MiB of memory decoded")) {
		t.Fatalf("an image over the machine's memory: %d %s", resp.StatusCode, b)
	}
	if n, _ := ts.coord.Counts(); n[job.StateQueued]+n[job.StateRunning] != 0 {
		t.Fatalf("the refused image's job was queued: %v", n)
	}
	st := ts.submit(testPNG(t, 1), `{"num_frames":2,"steps":2,"height":64,"width":64}`)
	if end := ts.wait(st.ID, 10e9); end.State != job.StateSucceeded {
		t.Fatalf("a small job: %+v", end)
	}

	_, err := New(Config{DataDir: t.TempDir(), NProc: 2, Spec: ModelSpec{Name: "synthetic"}, MaxMemory: mem,
		model: heavyModel{syntheticModel(t), 40 << 20}})
	if err == nil || !strings.Contains(err.Error(), "do not fit") {
		t.Fatalf("a model heavier than the memory: %v", err)
	}
}
