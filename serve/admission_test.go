package serve

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"image"
	"image/png"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/model/knob"
	"github.com/vdpp/vdpp/serve/job"
)

// admissionBudget runs the admission property test for longer than CI's few seconds
// (`go test ./serve -run TestAdmissionIsExecution -admission-budget 1h`).
var (
	admissionBudget = flag.Duration("admission-budget", 0, "how long TestAdmissionIsExecution draws jobs (0: a few seconds)")
	admissionSeed   = flag.Uint64("admission-seed", 0, "the seed TestAdmissionIsExecution draws from (0: the clock's; a failure names its seed)")
)

// hostile are values a careless or hostile client sends a knob whatever its kind: the
// edges of float32 integers and of int64, zero and minus one, a NaN, a huge float, text
// with spaces, a fraction, and a list of 20000 steps.
var hostile = []string{`16777217`, `9223372036854775807`, `9223372036854775808`, `0`, `-1`, `NaN`, `1e308`, `" 8 "`, `1.5`, `"x"`, `true`,
	`[` + strings.Repeat(`1,`, 20000) + `1]`, `null`, `{}`}

// drawJob draws a job's native JSON from the served model's knob table and an input image
// of a random shape (extreme aspect ratios included). Half the draws are careful: each knob
// with probability 1/4, a value from its range (edges included), the size, length and steps
// kept within lim so that many are admitted and run; the other half hostile: each knob with
// probability 1/3, a value from its range or one of hostile, now and then a knob of another
// family.
func drawJob(r *rand.Rand, t knob.Table, lim job.Limits) (params map[string]json.RawMessage, w, h int) {
	params = map[string]json.RawMessage{}
	careful := r.IntN(2) == 0
	for _, k := range t {
		if careful && r.IntN(4) != 0 || !careful && r.IntN(3) != 0 {
			continue
		}
		if !careful && r.IntN(4) == 0 {
			params[k.Name] = json.RawMessage(hostile[r.IntN(len(hostile))])
			continue
		}
		v := k.Random(r)
		if n, ok := v.(int64); ok && careful {
			switch k.Name {
			case "num_frames", "window", "overlap":
				v = 1 + n%int64(lim.MaxFrames)
			case "height", "width":
				v = 8 * (1 + n%int64(lim.MaxResolution/8))
			case "steps":
				v = 1 + n%int64(lim.MaxSteps)
			}
		}
		b, _ := json.Marshal(v)
		params[k.Name] = b
	}
	if careful {
		// A careful client gives a knob's pair with it and the cache mode its cache
		// fields apply to (what the table says of each knob).
		for _, k := range t {
			if _, ok := params[k.Name]; !ok {
				continue
			}
			if k.With != "" {
				if _, ok := params[k.With]; !ok {
					params[k.With] = params[k.Name]
				}
			}
			if len(k.Modes) > 0 {
				var mode string
				json.Unmarshal(params[knob.CacheKnob], &mode)
				if !slices.Contains(k.Modes, mode) {
					params[knob.CacheKnob], _ = json.Marshal(k.Modes[r.IntN(len(k.Modes))])
				}
			}
		}
	}
	if !careful && r.IntN(10) == 0 {
		params[[]string{"motion_bucket_id", "guidance_scale", "vae_tile", "guidance_scale_2"}[r.IntN(4)]] = json.RawMessage(`2`)
	}
	sizes := [][2]int{{8, 8}, {64, 64}, {48, 40}, {1, 4096}, {4096, 1}, {1 << 16, 1}, {300, 17}, {17, 300}}
	s := sizes[r.IntN(len(sizes))]
	return params, s[0], s[1]
}

func grayPNG(t testing.TB, w, h int) []byte {
	img := image.NewGray(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = uint8(i * 31)
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestAdmissionIsExecution is a property test: jobs drawn from the knob table's ranges
// (edges included) and beyond them (hostile), sent to servers on every kind of mesh
// through both APIs, are either refused 4xx before anything is queued, or admitted and
// then succeed on that mesh; no answer is a 5xx, no job fails, no worker exits.
func TestAdmissionIsExecution(t *testing.T) {
	budget := 4 * time.Second
	if testing.Short() {
		budget = time.Second
	}
	if *admissionBudget > 0 {
		budget = *admissionBudget
	}
	meshes := []comm.Mesh{
		{PP: 2, CFG: 1, CP: 1, DP: 1}, {PP: 1, CFG: 2, CP: 1, DP: 1}, {PP: 1, CFG: 1, CP: 2, DP: 1}, {PP: 1, CFG: 1, CP: 1, DP: 2},
	}
	servers := make([]*testServer, len(meshes))
	for i, m := range meshes {
		servers[i] = startServer(t, Config{Mesh: m, NProc: m.Size(), MaxQueue: 8, MaxRunning: 4, Spec: ModelSpec{Name: "synthetic"}})
	}
	table := servers[0].gen.Description().Knobs
	seed := *admissionSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	r := rand.New(rand.NewPCG(seed, 7))
	var tried, admitted int
	refused := map[int]int{}
	for deadline := time.Now().Add(budget); time.Now().Before(deadline); tried++ {
		si := r.IntN(len(servers))
		ts := servers[si]
		params, w, h := drawJob(r, table, job.DefaultLimits())
		js, _ := json.Marshal(params)
		img := grayPNG(t, w, h)
		openAI := r.IntN(2) == 0
		what := fmt.Sprintf("seed %d job %d (mesh %v, openai %v, image %dx%d): %s", seed, tried, meshes[si], openAI, w, h, js)
		var resp *http.Response
		var b []byte
		if openAI {
			fields := []string{"prompt", "p"}
			for _, k := range slices.Sorted(maps.Keys(params)) {
				v := params[k]
				name := k
				if kn, ok := table.Lookup(k); ok {
					name = kn.OpenAIName()
				}
				var s string
				if json.Unmarshal(v, &s) != nil {
					s = string(v)
				}
				if kn, ok := table.Lookup(k); ok && kn.Kind == knob.Steps {
					var steps []int
					if json.Unmarshal(v, &steps) == nil {
						s = knob.FormatSteps(steps)
					}
				}
				fields = append(fields, name, s)
			}
			body, ct := oaMultipart(t, img, fields...)
			resp, b = ts.do("POST", "/v1/videos", body, ct)
		} else {
			body, ct := multipartBody(t, img, string(js))
			resp, b = ts.do("POST", "/v1/videos", body, ct)
		}
		switch code := resp.StatusCode; {
		case code >= 500:
			t.Fatalf("%s: %d %s", what, code, b)
		case code >= 400:
			refused[code]++
			continue
		}
		admitted++
		var id string
		if openAI {
			var v struct{ ID string }
			mustJSON(t, b, &v)
			id = strings.TrimPrefix(v.ID, "video_")
		} else {
			var st job.Status
			mustJSON(t, b, &st)
			id = st.ID
		}
		if st := ts.wait(id, 60*time.Second); st.State != job.StateSucceeded {
			t.Fatalf("%s: admitted, then %s: %s (params %+v)", what, st.State, st.Error, st.Params)
		}
	}
	for i, ts := range servers {
		for _, w := range ts.pool.Workers() {
			if w.Restarts != 0 || w.Gone || !w.Connected {
				t.Errorf("mesh %v: worker %+v exited", meshes[i], w)
			}
		}
		if n, _ := ts.coord.Counts(); n[job.StateFailed] != 0 {
			t.Errorf("mesh %v: %d jobs failed", meshes[i], n[job.StateFailed])
		}
	}
	t.Logf("admission property: %d jobs tried, %d admitted and succeeded, refused %v (seed %d, %v)", tried, admitted, refused, seed, budget)
}
