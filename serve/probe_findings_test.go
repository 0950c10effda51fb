package serve

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/png"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/sched"
	"github.com/vdpp/vdpp/serve/dispatch"
	"github.com/vdpp/vdpp/serve/job"
	"github.com/vdpp/vdpp/tensor"
)

// The third hostile probe's findings (F1-F11), each reproduced from its one-line
// description against an in-process server on the synthetic model, and answered as a
// careful client expects.

// stripPNG is a w x h PNG of one grey level (a 1048576x1 strip is a few KB).
func stripPNG(t testing.TB, w, h int) []byte {
	t.Helper()
	img := image.NewGray(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = uint8(i)
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// F1: a 3 KB PNG of 1048576x1 pixels is within the megapixel image limit; its prepare took
// 20 minutes of coordinator time, so every later job waited. It is refused up front (a
// 400 naming the aspect ratio), in both APIs, in well under a second, and queues nothing.
func TestProbeF1ExtremeAspectRefused(t *testing.T) {
	ts := startServer(t, Config{NProc: 1, MaxQueue: 4})
	img := stripPNG(t, 1<<20, 1)
	t0 := time.Now()
	body, ct := multipartBody(t, img, `{"steps":2}`)
	resp, b := ts.do("POST", "/v1/videos", body, ct)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "1048576x1") {
		t.Fatalf("native: %d %s", resp.StatusCode, b)
	}
	obody, oct := oaMultipart(t, img, "prompt", "p", "num_inference_steps", "2")
	resp, b = ts.do("POST", "/v1/videos", obody, oct)
	checkOAError(t, resp, b, http.StatusBadRequest, "bad_params", "input_reference")
	if d := time.Since(t0); d > 2*time.Second {
		t.Errorf("refusing two 1048576x1 uploads took %v", d)
	}
	if _, b := ts.do("GET", "/v1/videos", nil, ""); !bytes.Contains(b, []byte(`"data": []`)) {
		t.Errorf("a refused upload left a job: %s", b)
	}
	// A job of an ordinary image still runs.
	st := ts.submit(testPNG(t, 1), `{"steps":2}`)
	if got := ts.wait(st.ID, 30*time.Second); got.State != "succeeded" {
		t.Fatalf("an ordinary job after the refusals: %+v", got)
	}
}

// F2: {"cache":"deepcache","cache_interval":16777217} (native or OpenAI) was accepted, the
// hand-off carried the rule as float32, the next stage refused it and both ranks died. It
// is refused (400 naming cache_interval) in both APIs before anything is queued, and the
// workers are the ones that joined.
func TestProbeF2CacheIntervalRefused(t *testing.T) {
	ts := startServer(t, Config{NProc: 2, MaxQueue: 4})
	img := testPNG(t, 2)
	body, ct := multipartBody(t, img, `{"steps":4,"cache":"static","cache_interval":16777217}`)
	resp, b := ts.do("POST", "/v1/videos", body, ct)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "cache_interval 16777217 must be in [2, 10000]") {
		t.Fatalf("native: %d %s", resp.StatusCode, b)
	}
	obody, oct := oaMultipart(t, img, "prompt", "p", "num_inference_steps", "4", "cache", "static", "cache_interval", "16777217")
	resp, b = ts.do("POST", "/v1/videos", obody, oct)
	checkOAError(t, resp, b, http.StatusBadRequest, "invalid_value", "cache_interval")
	pids := ts.pool.Workers()
	st := ts.submit(img, `{"steps":4,"cache":"static","cache_interval":3}`)
	if got := ts.wait(st.ID, 30*time.Second); got.State != "succeeded" {
		t.Fatalf("a cached job: %+v", got)
	}
	for i, w := range ts.pool.Workers() {
		if w.Pid != pids[i].Pid || w.Restarts != 0 {
			t.Fatalf("worker %d restarted: %+v then %+v", i, pids[i], w)
		}
	}
}

// F9: cache_threshold 0 and cache_interval 0 silently became the defaults while -1 and 1
// were refused, and the fields of another cache mode were accepted and stored. Each is a
// 400 naming the field.
func TestProbeF9CacheFieldsExact(t *testing.T) {
	ts := startServer(t, Config{NProc: 1, MaxQueue: 4})
	img := testPNG(t, 3)
	for params, want := range map[string]string{
		`{"cache":"fbcache","cache_threshold":0}`:                     "cache_threshold 0 must be in (0, 1000]",
		`{"cache":"static","cache_interval":0}`:                       "cache_interval 0 must be in [2, 10000]",
		`{"cache":"fbcache","cache_interval":3}`:                      "cache_interval applies to cache static, not fbcache",
		`{"cache":"static","cache_interval":3,"cache_threshold":0.1}`: "cache_threshold applies to cache fbcache, not static",
		`{"cache_threshold":0.1}`:                                     "cache_threshold applies to cache fbcache only, and no cache is set",
	} {
		body, ct := multipartBody(t, img, params)
		resp, b := ts.do("POST", "/v1/videos", body, ct)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), want) {
			t.Errorf("%s: %d %s, want 400 with %q", params, resp.StatusCode, b, want)
		}
	}
}

// F10: the OpenAI API refused cache_drop in every spelling, and an OpenAI error for
// cache_threshold named param "cache". cache_drop is an OpenAI field like the native one,
// and each error names the field at fault.
func TestProbeF10OpenAICacheFields(t *testing.T) {
	ts := startServer(t, Config{NProc: 2, MaxQueue: 4})
	img := testPNG(t, 4)
	v := ts.oaCreate(img, "prompt", "p", "num_inference_steps", "4", "cache", "fbcache", "cache_threshold", "0.2", "cache_drop", "true")
	st := ts.status(strings.TrimPrefix(v.ID, "video_"))
	if !st.Params.Cache.Drop || st.Params.Cache.Threshold != 0.2 {
		t.Fatalf("cache_drop and cache_threshold over the OpenAI API: %+v", st.Params.Cache)
	}
	body, ct := oaMultipart(t, img, "prompt", "p", "cache", "fbcache", "cache_threshold", "-1")
	resp, b := ts.do("POST", "/v1/videos", body, ct)
	checkOAError(t, resp, b, http.StatusBadRequest, "invalid_value", "cache_threshold")
	body, ct = oaMultipart(t, img, "prompt", "p", "cache_drop", "yes")
	resp, b = ts.do("POST", "/v1/videos", body, ct)
	checkOAError(t, resp, b, http.StatusBadRequest, "invalid_value", "cache_drop")
}

// F11 (the parameters): size " 64x64 " was accepted, duplicate JSON keys were taken (the last
// won), window 0 became 14. Each is a 400 naming the field.
func TestProbeF11StrictParameters(t *testing.T) {
	ts := startServer(t, Config{NProc: 1, MaxQueue: 4})
	img := testPNG(t, 5)
	body, ct := oaMultipart(t, img, "prompt", "p", "size", " 64x64 ")
	resp, b := ts.do("POST", "/v1/videos", body, ct)
	checkOAError(t, resp, b, http.StatusBadRequest, "invalid_value", "size")
	resp, b = ts.do("POST", "/v1/videos", strings.NewReader(`{"prompt":"p","seconds":"1","seconds":"2"}`), "application/json")
	checkOAError(t, resp, b, http.StatusBadRequest, "invalid_json", "")
	for params, want := range map[string]string{
		`{"steps":2,"steps":3}`:          `is given twice`,
		`{"num_frames":20,"window":0}`:   "window 0 must be in [1, 1048576]",
		`{"steps":2,"guidance_scale":3}`: "guidance_scale applies to wan models",
	} {
		body, ct := multipartBody(t, img, params)
		resp, b := ts.do("POST", "/v1/videos", body, ct)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), want) {
			t.Errorf("%s: %d %s, want 400 with %q", params, resp.StatusCode, b, want)
		}
	}
}

// F11 (the routes): model "" was accepted, POST /v1/admin/workers/99/kill said "no such
// job", and the official POST /v1/videos/{id}/remix got a native-shaped error. And the first
// day: no /health. Each is answered as its API documents.
func TestProbeF11Routes(t *testing.T) {
	ts := startServer(t, Config{NProc: 1, MaxQueue: 4})
	img := testPNG(t, 6)
	body, ct := oaMultipart(t, img, "prompt", "p", "model", "")
	resp, b := ts.do("POST", "/v1/videos", body, ct)
	checkOAError(t, resp, b, http.StatusNotFound, "model_not_found", "model")
	resp, b = ts.do("POST", "/v1/admin/workers/99/kill", nil, "")
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(b), "no such worker rank 99") {
		t.Errorf("kill rank 99: %d %s", resp.StatusCode, b)
	}
	v := ts.oaCreate(img, "prompt", "p", "num_inference_steps", "2")
	resp, b = ts.do("POST", "/v1/videos/"+v.ID+"/remix", strings.NewReader(`{"prompt":"q"}`), "application/json")
	checkOAError(t, resp, b, http.StatusBadRequest, "unsupported", "")
	resp, b = ts.do("PUT", "/v1/videos/"+v.ID, nil, "")
	checkOAError(t, resp, b, http.StatusMethodNotAllowed, "method_not_allowed", "")
	resp, b = ts.do("GET", "/v1/videos/"+v.ID+"/frames", nil, "")
	checkOAError(t, resp, b, http.StatusNotFound, "no_route", "")
	resp, b = ts.do("GET", "/health", nil, "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"ok"`) {
		t.Errorf("/health: %d %s", resp.StatusCode, b)
	}
}

// F5: GET /v1/videos?after=ID answered 404 once ID was deleted, which broke the SDK's
// list-and-delete loop after one page. A page after a deleted job continues from where it
// stood: the loop deletes every job.
func TestProbeF5ListAfterDeleted(t *testing.T) {
	ts := startServer(t, Config{NProc: 1, MaxQueue: 16})
	img := testPNG(t, 7)
	for range 5 {
		v := ts.oaCreate(img, "prompt", "p", "num_inference_steps", "1")
		ts.oaWait(v.ID)
	}
	deleted, after := 0, ""
	for page := 0; page < 10; page++ {
		q := "/v1/videos?limit=2&order=asc"
		if after != "" {
			q += "&after=" + after
		}
		resp, b := ts.do("GET", q, nil, "")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("page %d after %s: %d %s", page, after, resp.StatusCode, b)
		}
		var list struct {
			Data []struct {
				ID string `json:"id"`
			} `json:"data"`
			HasMore bool `json:"has_more"`
		}
		mustJSON(t, b, &list)
		for _, v := range list.Data {
			if resp, b := ts.do("DELETE", "/v1/videos/"+v.ID, nil, ""); resp.StatusCode != http.StatusOK {
				t.Fatalf("delete %s: %d %s", v.ID, resp.StatusCode, b)
			}
			deleted++
			after = v.ID
		}
		if !list.HasMore {
			break
		}
	}
	if deleted != 5 {
		t.Fatalf("the list-and-delete loop deleted %d of 5 jobs", deleted)
	}
	resp, b := ts.do("GET", "/v1/videos?after=video_0123456789abcdef01234567", nil, "")
	checkOAError(t, resp, b, http.StatusNotFound, "not_found", "")
}

// F6: after a restart with another mesh, queued jobs the new mesh cannot run were dispatched
// and failed with internal text. They are caught at load: failed before anything runs,
// with a reason a client can act on; the jobs the mesh can run run.
func TestProbeF6RemeshValidatesQueuedJobs(t *testing.T) {
	dir := t.TempDir()
	st, _, err := openStore(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	img := testPNG(t, 8)
	now := time.Now().UTC()
	unguided := mustParams(t, `{"num_frames":2,"steps":2,"height":8,"width":8,"max_guidance":1}`)
	guided := mustParams(t, `{"num_frames":2,"steps":2,"height":8,"width":8,"max_guidance":3}`)
	recs := []job.Record{
		{ID: "00000000000000000000000a", Seq: 1, State: job.StateQueued, Params: unguided, CreatedAt: now},
		{ID: "00000000000000000000000b", Seq: 2, State: job.StateRunning, Params: guided, CreatedAt: now},
	}
	for _, r := range recs {
		if err := st.WriteFile(r.ID, inputFile, img); err != nil {
			t.Fatal(err)
		}
		if err := st.Put(r); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	// The server comes back with its workers as cfg pairs: the unguided job has no halves.
	ts := startServer(t, Config{DataDir: dir, NProc: 2, Mesh: comm.Mesh{PP: 1, CFG: 2, CP: 1, DP: 1}})
	bad := ts.wait(recs[0].ID, 30*time.Second)
	if bad.State != job.StateFailed || !strings.Contains(bad.Error, "cfg 2") || !strings.Contains(bad.Error, "unguided") ||
		strings.Contains(bad.Error, "serve:") || bad.Progress.Stages != 0 {
		t.Fatalf("the unguided job after the remesh: %+v", bad)
	}
	if ok := ts.wait(recs[1].ID, 30*time.Second); ok.State != job.StateSucceeded {
		t.Fatalf("the guided job after the remesh: %+v", ok)
	}
}

// F8: with the free-space floor off (--min-free-space -1), a full disk gave 500 on downloads
// where serve.md promises 507: ffmpeg's failure wraps no errno. A render that fails on a full
// disk is a 507 whatever the floor and whoever writes the file.
func TestProbeF8FullDiskDownloadIs507(t *testing.T) {
	var free atomic.Int64
	free.Store(1 << 40)
	ts := startServer(t, Config{NProc: 1, MinFreeBytes: -1, freeBytes: func() (int64, error) { return free.Load(), nil }},
		func(s *Server) {
			s.mp4 = func(string, []image.Image, float64) error {
				if free.Load() == 0 {
					return errors.New("video: ffmpeg: exit status 1: [out#0/mp4] Error writing trailer: No space left on device")
				}
				return nil
			}
		})
	st := ts.wait(ts.submit(testPNG(t, 9), `{"num_frames":2,"steps":2,"height":8,"width":8}`).ID, 30*time.Second)
	free.Store(0)
	for _, path := range []string{"/v1/videos/" + st.ID + "/content", "/v1/videos/video_" + st.ID + "/content"} {
		resp, b := ts.do("GET", path, nil, "")
		if resp.StatusCode != http.StatusInsufficientStorage || resp.Header.Get("Retry-After") == "" || strings.Contains(string(b), "/") {
			t.Errorf("%s on a full disk: %d %s", path, resp.StatusCode, b)
		}
	}
}

// slowPrepModel is the synthetic model whose prepares cost as a real image-to-video
// model's do: time in proportion to the input's pixels (perMP a megapixel), one network
// call at a time. A prepare first waits for gate to close (nil: it does not wait); each
// records its input's pixels in order when it gets the network.
type slowPrepModel struct {
	*Model
	perMP time.Duration
	one   chan struct{}
	gate  chan struct{}
	order *prepOrder
}

// prepOrder is the pixels of each prepare's input, in the order they got the network.
type prepOrder struct {
	mu sync.Mutex
	px []int
}

func (o *prepOrder) add(px int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.px = append(o.px, px)
}

func (o *prepOrder) get() []int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.px)
}

func (m slowPrepModel) Prepare(ctx context.Context, in family.Input, p job.Params, sc sched.Scheduler) (*dispatch.Sample, error) {
	if m.gate != nil {
		select {
		case <-m.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	select {
	case m.one <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-m.one }()
	if in.Image != nil {
		b := in.Image.Bounds()
		if m.order != nil {
			m.order.add(b.Dx() * b.Dy())
		}
		d := time.Duration(float64(m.perMP) * float64(b.Dx()*b.Dy()) / (1 << 20))
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return m.Model.Prepare(ctx, in, p, sc)
}

// started waits until job id has run a step (or ended) and returns how long after t0.
func (ts *testServer) started(id string, t0 time.Time, limit time.Duration) time.Duration {
	ts.t.Helper()
	for deadline := time.Now().Add(limit); ; time.Sleep(5 * time.Millisecond) {
		st := ts.status(id)
		if st.Progress.Step >= 1 || st.State.Final() {
			return time.Since(t0)
		}
		if time.Now().After(deadline) {
			ts.t.Fatalf("job %s did not start within %v: %+v", id, limit, st)
		}
	}
}

// F4: prepares were not scheduled: a 64x64 job waited 17.9 s behind twelve 1 MP uploads
// (each prepare a second and more, one after another, first come first served). Prepares
// are scheduled work: a bounded pool picks the cheapest (within a client, and round robin
// between clients), so the small job starts as soon as a prepare ends, while most of the
// 1 MP jobs still wait (first come first served, all twelve went before it); on an idle
// machine that is within a second (the measurement page has the real binary's).
func TestProbeF4PreparesScheduled(t *testing.T) {
	const maxPrepares = 2
	order := &prepOrder{}
	gate := make(chan struct{})
	ts := startServer(t, Config{NProc: 1, MaxQueue: 64, MaxRunning: 64, MaxPrepares: maxPrepares,
		model: slowPrepModel{syntheticModel(t), 500 * time.Millisecond, make(chan struct{}, 1), gate, order}})
	big := stripPNG(t, 1024, 1024)
	for range 12 {
		ts.submit(big, `{"num_frames":1,"steps":1,"height":64,"width":64}`)
	}
	small := ts.submit(stripPNG(t, 64, 64), `{"num_frames":1,"steps":1,"height":64,"width":64}`)
	// Every job is queued before any prepare runs (the gate), so what goes first is the
	// scheduler's choice alone, whatever the machine's load.
	t0 := time.Now()
	close(gate)
	d := ts.started(small.ID, t0, 60*time.Second)
	got := order.get()
	before := slices.Index(got, 64*64)
	if before < 0 || before > maxPrepares {
		t.Fatalf("the 64x64 job's prepare ran after %d of twelve 1 MP prepares (at most the %d already holding a prepare slot may go first; first come first served runs all twelve), started %v after the prepares began", before, maxPrepares, d)
	}
	t.Logf("the 64x64 job's prepare ran after %d 1 MP prepares; it started %v after the prepares began", before, d)
	if got := ts.modelLimits(); got.MaxPrepares != maxPrepares {
		t.Errorf("/v1/limits max_prepares %d, want %d", got.MaxPrepares, maxPrepares)
	}
}

// F3: no per-client share: one client's 80 quick submissions filled the queue and another
// client's single job got 429 (or waited 30 s behind 60 of them). A client's burst is
// refused beyond its share, for itself only; the other client's job is admitted and, round
// robin between clients, finishes in seconds while the first keeps flooding.
func TestProbeF3FairShare(t *testing.T) {
	ts := startServer(t, Config{NProc: 1, MaxQueue: 16, MaxRunning: 1, MaxBatch: 1, Spec: ModelSpec{Name: "synthetic", StepMS: 20}})
	img := testPNG(t, 10)
	submitAs := func(key string) (int, job.Status) {
		body, ct := multipartBody(t, img, `{"num_frames":1,"steps":5,"height":8,"width":8}`)
		resp, b := ts.do("POST", "/v1/videos", body, ct, "Authorization", "Bearer "+key)
		var st job.Status
		if resp.StatusCode == http.StatusAccepted {
			mustJSON(t, b, &st)
		}
		return resp.StatusCode, st
	}
	refused := 0
	for range 80 {
		if code, _ := submitAs("flooder"); code == http.StatusTooManyRequests {
			refused++
		}
	}
	if refused == 0 {
		t.Fatal("80 submissions of one client were all queued")
	}
	stop := make(chan struct{})
	flood := make(chan struct{})
	go func() { // the first client keeps flooding
		defer close(flood)
		for {
			select {
			case <-stop:
				return
			default:
				submitAs("flooder")
			}
		}
	}()
	t0 := time.Now()
	code, st := submitAs("other")
	if code != http.StatusAccepted {
		close(stop)
		<-flood
		t.Fatalf("the second client's only job: %d, want 202", code)
	}
	done := ts.wait(st.ID, 30*time.Second)
	took := time.Since(t0)
	close(stop)
	<-flood
	if done.State != job.StateSucceeded || took > 5*time.Second {
		t.Fatalf("the second client's job: %s after %v (a flood of 5-step jobs of 0.1 s each ahead of it)", done.State, took)
	}
}

// A job that leaves its seed out, or asks -1, gets a random seed, recorded in its params: the
// same params run again give the same video.
func TestRandomSeedRecorded(t *testing.T) {
	ts := startServer(t, Config{NProc: 1, MaxQueue: 8})
	img := testPNG(t, 11)
	seeds := map[int64]bool{}
	for _, params := range []string{`{"num_frames":1,"steps":2,"height":8,"width":8}`, `{"num_frames":1,"steps":2,"height":8,"width":8,"seed":-1}`,
		`{"num_frames":1,"steps":2,"height":8,"width":8}`} {
		st := ts.wait(ts.submit(img, params).ID, 30*time.Second)
		if st.State != job.StateSucceeded || st.Params.Seed < 0 {
			t.Fatalf("%s: %+v", params, st)
		}
		seeds[st.Params.Seed] = true
		if !tensor.BitEqual(ts.latent(st.ID), reference(t, img, st.Params)) {
			t.Fatalf("%s: the recorded seed %d does not give the video", params, st.Params.Seed)
		}
	}
	if len(seeds) < 2 {
		t.Fatalf("three random seeds were %v", seeds)
	}
}

// blockPrepModel is the synthetic model whose prepares of an image over 64x64 pixels say
// so on entered and then last until their context ends.
type blockPrepModel struct {
	*Model
	entered chan struct{}
}

func (m blockPrepModel) Prepare(ctx context.Context, in family.Input, p job.Params, sc sched.Scheduler) (*dispatch.Sample, error) {
	if b := in.Image.Bounds(); b.Dx()*b.Dy() > 64*64 {
		m.entered <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return m.Model.Prepare(ctx, in, p, sc)
}

// A server told to stop (SIGTERM's path: Server.Close) while jobs are prepared and while one
// runs stops within 5 s, and loses nothing it accepted: the server started again on the
// same data dir finishes every job.
func TestCloseDuringPrepareAndRun(t *testing.T) {
	dir := t.TempDir()
	hold := filepath.Join(t.TempDir(), "hold")
	if err := os.WriteFile(hold, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	m := blockPrepModel{syntheticModel(t), make(chan struct{}, 8)}
	ts := startServer(t, Config{DataDir: dir, NProc: 1, MaxPrepares: 2, MaxRunning: 4, HoldFile: hold, model: m})
	small, big := testPNG(t, 12), stripPNG(t, 256, 256)
	const params = `{"num_frames":1,"steps":3,"height":8,"width":8}`
	running := ts.submit(small, params).ID
	ts.waitStep(running, 1) // held at its first step
	ids := []string{running}
	for range 2 {
		ids = append(ids, ts.submit(big, params).ID)
	}
	<-m.entered // both prepares in flight
	<-m.entered
	ids = append(ids, ts.submit(small, params).ID) // queued behind them
	t0 := time.Now()
	if err := ts.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if took := time.Since(t0); took > 5*time.Second {
		t.Fatalf("Close took %v with two prepares and a running job", took)
	}
	ts2 := startServer(t, Config{DataDir: dir, NProc: 1, Spec: ModelSpec{Name: "synthetic"}})
	for _, id := range ids {
		if st := ts2.wait(id, 30*time.Second); st.State != job.StateSucceeded {
			t.Fatalf("job %s after the restart: %+v", id, st)
		}
	}
}
