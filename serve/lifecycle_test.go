package serve

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/internal/wait"
	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/model/synthetic"
	"github.com/vdpp/vdpp/serve/job"
	"github.com/vdpp/vdpp/serve/openai"
	"github.com/vdpp/vdpp/serve/wire"
	"github.com/vdpp/vdpp/tensor"
)

func TestCancel(t *testing.T) {
	ts := startServer(t, Config{NProc: 2, MaxRunning: 1, Spec: ModelSpec{Name: "synthetic", StepMS: 10}})
	img := testPNG(t, 4)
	slow := `{"num_frames":1,"steps":40,"height":8,"width":8}`
	running := ts.submit(img, slow)
	queued := ts.submit(img, slow)
	// Wait until the first job has run a few steps.
	ts.waitStep(running.ID, 3)
	if st := ts.status(queued.ID); st.State != job.StateQueued {
		t.Fatalf("second job %s, want queued (max-running 1)", st.State)
	}
	for _, id := range []string{queued.ID, running.ID} {
		if resp, b := ts.do("DELETE", "/v1/videos/"+id, nil, ""); resp.StatusCode != http.StatusAccepted {
			t.Fatalf("cancel: %d %s", resp.StatusCode, b)
		}
	}
	if st := ts.status(queued.ID); st.State != job.StateCancelled {
		t.Fatalf("queued job after cancel: %s", st.State)
	}
	t0 := time.Now()
	st := ts.wait(running.ID, 5*time.Second)
	if st.State != job.StateCancelled || st.Progress.Step >= 40 {
		t.Fatalf("running job after cancel: %+v", st)
	}
	if d := time.Since(t0); d > time.Second {
		t.Fatalf("cancel took %v; a step is 10 ms", d)
	}
	// The slot is free again: a new job runs to the end.
	next := ts.submit(img, `{"num_frames":1,"steps":3,"height":8,"width":8}`)
	if st := ts.wait(next.ID, 5*time.Second); st.State != job.StateSucceeded {
		t.Fatalf("job after cancel: %+v", st)
	}
	// A cancelled job has ended: cancelling it again is a conflict; it has no content.
	if resp, _ := ts.do("DELETE", "/v1/videos/"+running.ID, nil, ""); resp.StatusCode != http.StatusConflict {
		t.Fatalf("second cancel: %d, want 409", resp.StatusCode)
	}
	if resp, _ := ts.do("GET", "/v1/videos/"+running.ID+"/content", nil, ""); resp.StatusCode != http.StatusConflict {
		t.Fatalf("content of a cancelled job: %d", resp.StatusCode)
	}
}

func TestQueueFull429(t *testing.T) {
	ts := startServer(t, Config{NProc: 1, MaxRunning: 1, MaxQueue: 2, Spec: ModelSpec{Name: "synthetic", StepMS: 20}})
	img := testPNG(t, 5)
	var accepted []string
	var got429 bool
	for i := 0; i < 6 && !got429; i++ {
		body, ct := multipartBody(t, img, `{"num_frames":1,"steps":10,"height":8,"width":8}`)
		resp, b := ts.do("POST", "/v1/videos", body, ct)
		switch resp.StatusCode {
		case http.StatusAccepted:
			var st job.Status
			mustJSON(t, b, &st)
			accepted = append(accepted, st.ID)
		case http.StatusTooManyRequests:
			got429 = true
			if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || ra < 1 {
				t.Fatalf("Retry-After %q", resp.Header.Get("Retry-After"))
			}
		default:
			t.Fatalf("submit %d: %d %s", i, resp.StatusCode, b)
		}
	}
	if !got429 || len(accepted) != 3 {
		t.Fatalf("429 after %d accepted jobs (want 3: 1 running + 2 queued)", len(accepted))
	}
	// Every accepted job still completes.
	for _, id := range accepted {
		if st := ts.wait(id, 10*time.Second); st.State != job.StateSucceeded {
			t.Fatalf("job %s: %+v", id, st)
		}
	}
	_, m := ts.do("GET", "/metrics", nil, "")
	if !containsLine(string(m), "vdpp_jobs_rejected_total 1") {
		t.Fatalf("rejections not counted:\n%s", m)
	}
}

func TestAuthToken(t *testing.T) {
	ts := startServer(t, Config{Token: "s3cret", Spec: ModelSpec{Name: "synthetic"}})
	img := testPNG(t, 1)
	body, ct := multipartBody(t, img, fmt.Sprintf(smallJob, 1))
	if resp, b := ts.do("POST", "/v1/videos", body, ct); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: %d %s", resp.StatusCode, b)
	}
	body, ct = multipartBody(t, img, fmt.Sprintf(smallJob, 1))
	if resp, _ := ts.do("POST", "/v1/videos", body, ct, "Authorization", "Bearer wrong"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", resp.StatusCode)
	}
	body, ct = multipartBody(t, img, fmt.Sprintf(smallJob, 1))
	resp, b := ts.do("POST", "/v1/videos", body, ct, "Authorization", "Bearer s3cret")
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("right token: %d %s", resp.StatusCode, b)
	}
	// The job may still be running when the test ends: Close waits for every store write
	// before the data folder is removed.
	if resp, _ := ts.do("GET", "/metrics", nil, ""); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("metrics without token: %d", resp.StatusCode)
	}
	if resp, _ := ts.do("GET", "/healthz", nil, ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz is open: %d", resp.StatusCode)
	}
}

// TestBatchingKeepsBits runs many jobs through few workers with batches of up to 4 and
// checks every output against the one-process run. The jobs use the three samplers the
// model offers (Euler ancestral draws noise keyed by the job's seed; DPM++ 2M carries its
// previous x0 from batch to batch), which never share a batch.
func TestBatchingKeepsBits(t *testing.T) {
	ts := startServer(t, Config{NProc: 2, MaxBatch: 4, Spec: ModelSpec{Name: "synthetic", StepMS: 2}})
	type sub struct {
		id  string
		img []byte
		p   string
	}
	subs := make([]sub, 16)
	var wg sync.WaitGroup
	for i := range subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			img := testPNG(t, i)
			p := fmt.Sprintf(`{"num_frames":2,"steps":6,"height":16,"width":16,"seed":%d,"max_guidance":%d,"scheduler":%q}`, i, 1+i%2*2,
				[]string{"euler", "euler-a", "dpm++2m-karras"}[i%3])
			subs[i] = sub{ts.submit(img, p).ID, img, p}
		}()
	}
	wg.Wait()
	for _, s := range subs {
		if st := ts.wait(s.id, 20*time.Second); st.State != job.StateSucceeded {
			t.Fatalf("job %s: %+v", s.id, st)
		}
		if !tensor.BitEqual(ts.latent(s.id), reference(t, s.img, mustParams(t, s.p))) {
			t.Fatalf("job %s differs from the one-process run", s.id)
		}
	}
	_, m := ts.do("GET", "/metrics", nil, "")
	if containsLine(string(m), `vdpp_batch_size_bucket{le="1"} `+strconv.Itoa(int(countLine(string(m), "vdpp_batch_size_count")))) {
		t.Fatalf("no batch held more than one sample:\n%s", m)
	}
}

// TestRestartKeepsJobs stops a server mid-load and starts another on the same data dir:
// finished jobs stay downloadable and unfinished ones complete with the same bits.
func TestRestartKeepsJobs(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{DataDir: dir, NProc: 2, MaxRunning: 2, Spec: ModelSpec{Name: "synthetic", StepMS: 5}}
	ts := startServer(t, cfg)
	img := testPNG(t, 9)
	var ids []string
	var params []string
	for i := 0; i < 8; i++ {
		p := fmt.Sprintf(`{"num_frames":1,"steps":6,"height":8,"width":8,"seed":%d}`, 100+i)
		ids = append(ids, ts.submit(img, p).ID)
		params = append(params, p)
	}
	first := ts.wait(ids[0], 10*time.Second)
	if first.State != job.StateSucceeded {
		t.Fatalf("first job: %+v", first)
	}
	firstLatent := ts.latent(ids[0])
	ts.Close()

	ts2 := startServer(t, cfg)
	if !tensor.BitEqual(ts2.latent(ids[0]), firstLatent) {
		t.Fatal("finished job's output changed across the restart")
	}
	for i, id := range ids {
		st := ts2.wait(id, 20*time.Second)
		if st.State != job.StateSucceeded {
			t.Fatalf("job %d after restart: %+v", i, st)
		}
		if !tensor.BitEqual(ts2.latent(id), reference(t, img, mustParams(t, params[i]))) {
			t.Fatalf("job %d differs from the one-process run after the restart", i)
		}
	}
}

// TestWorkerKilledMidJob kills ranks while jobs run: every job completes, bit-identical.
// Each kill is ordered by a hook, not by time: a rank's first report of a job's later step
// (one the coordinator has not yet taken in, so its batch is unfinished) makes the read
// loop kill that rank before handling it; every rank is killed once.
func TestWorkerKilledMidJob(t *testing.T) {
	const nproc = 3
	var mu sync.Mutex
	killed := map[int]bool{}
	cfg := Config{NProc: nproc, MaxBatch: 2, Spec: ModelSpec{Name: "synthetic", StepMS: 3}, HeartbeatTimeout: time.Second}
	ts := startServer(t, cfg, func(s *Server) {
		s.coord.hooks.received = func(rank int, m comm.Message) {
			if op, _, err := wire.Op(m); err != nil || op != wire.OpProgress || m.Step < 1 {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if killed[rank] { // once per rank: its killed connection's reports may still come in
				return
			}
			killed[rank] = true
			if err := s.pool.Kill(rank); err != nil {
				t.Errorf("kill rank %d: %v", rank, err)
			}
		}
	})
	img := testPNG(t, 11)
	var ids, params []string
	for i := 0; i < 10; i++ {
		p := fmt.Sprintf(`{"num_frames":2,"steps":9,"height":8,"width":16,"seed":%d,"max_guidance":2}`, i)
		ids = append(ids, ts.submit(img, p).ID)
		params = append(params, p)
	}
	restarted := 0
	for i, id := range ids {
		st := ts.wait(id, 30*time.Second)
		if st.State != job.StateSucceeded {
			t.Fatalf("job %d: %+v", i, st)
		}
		restarted += st.Restarts
		if !tensor.BitEqual(ts.latent(id), reference(t, img, mustParams(t, params[i]))) {
			t.Fatalf("job %d differs from the no-fault run", i)
		}
	}
	mu.Lock()
	kills := len(killed)
	mu.Unlock()
	if kills != nproc {
		t.Fatalf("ranks %v killed, want all %d", killed, nproc)
	}
	// Every kill is a loss and a restart (a killed rank's last reports may still be taken
	// in after its jobs finished, so the loss can come after them).
	want := float64(kills)
	var m []byte
	if !wait.For(10*time.Second, func() bool {
		_, m = ts.do("GET", "/metrics", nil, "")
		return countLine(string(m), "vdpp_worker_lost_total") >= want && countLine(string(m), "vdpp_worker_restarts_total") >= want
	}) {
		t.Fatalf("%v kills, fewer losses or restarts recorded:\n%s", want, m)
	}
	t.Logf("%d kills, %d sample-stage re-runs after them", kills, restarted)
	// The pool brought every rank back.
	ts.waitReady()
}

// hangOnce is a denoiser whose every call blocks until its worker is stopped.
type hangOnce struct{ model.Denoiser }

func (hangOnce) Predict(ctx context.Context, _ model.Input) (*tensor.Dense, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestStalledWorkerRestarted: a rank that keeps answering pings but never finishes a step is
// declared dead after the stall timeout, restarted, and the job completes with the same bits.
func TestStalledWorkerRestarted(t *testing.T) {
	spec := ModelSpec{Name: "synthetic"}
	var made atomic.Int32
	launcher := InProcLauncher{Spec: spec, NewDenoiser: func() (model.Denoiser, error) {
		d, err := synthetic.New(model.Config{})
		if made.Add(1) == 1 { // the first rank started (rank 0) hangs
			return hangOnce{d}, err
		}
		return d, err
	}}
	ts := startServer(t, Config{NProc: 2, Spec: spec, Launcher: launcher, StallTimeout: 300 * time.Millisecond})
	img := testPNG(t, 2)
	p := `{"num_frames":1,"steps":4,"height":8,"width":8,"seed":3}`
	st := ts.wait(ts.submit(img, p).ID, 10*time.Second)
	if st.State != job.StateSucceeded || st.Restarts < 1 {
		t.Fatalf("job %+v", st)
	}
	if !tensor.BitEqual(ts.latent(st.ID), reference(t, img, mustParams(t, p))) {
		t.Fatal("output differs from the one-process run")
	}
}

// TestCachedBatchingKeepsBits: cached jobs (a job parameter) batched with each other give
// the bits and decisions of the job run alone; uncached jobs alongside are not batched with
// them; a finished cached job lists its calls and says in one line what its cache did, in
// its record and in the OpenAI object's metadata.
func TestCachedBatchingKeepsBits(t *testing.T) {
	ts := startServer(t, Config{NProc: 2, MaxBatch: 4, Spec: ModelSpec{Name: "synthetic", StepMS: 1}})
	ids, params := make([]string, 8), make([]string, 8)
	img := testPNG(t, 1)
	for i := range ids {
		cache := ""
		if i%4 != 3 {
			cache = `,"cache":"fbcache","cache_threshold":0.05`
		}
		params[i] = fmt.Sprintf(`{"num_frames":2,"steps":8,"height":16,"width":16,"seed":%d,"max_guidance":3%s}`, i, cache)
		ids[i] = ts.submit(img, params[i]).ID
	}
	for i, id := range ids {
		st := ts.wait(id, 20*time.Second)
		if st.State != job.StateSucceeded {
			t.Fatalf("job %s: %+v", id, st)
		}
		p := mustParams(t, params[i])
		if !tensor.BitEqual(ts.latent(id), reference(t, img, p)) {
			t.Fatalf("job %d differs from the one-process run", i)
		}
		if cached := p.Cache.On(); cached != (st.Cache != nil) || cached && (st.Cache.TotalCalls != 16 || st.Cache.ComputedCalls >= 16) {
			t.Fatalf("job %d: cache %v, status %+v", i, p.Cache, st.Cache)
		}
		if !p.Cache.On() {
			continue
		}
		if want := fmt.Sprintf("cache fbcache (threshold 0.05): computed %d of 16 calls", st.Cache.ComputedCalls); !strings.HasPrefix(st.Cache.Summary, want) || !strings.Contains(st.Cache.Summary, "saved") {
			t.Fatalf("job %d: cache line %q, want %q... with the time saved", i, st.Cache.Summary, want)
		}
	}
	if ts.status(ids[0]).Cache == nil {
		t.Fatal("the status lost the cache records")
	}
	if v := ts.oaWait(openai.IDPrefix + ids[0]); v.Metadata["cache"] != ts.status(ids[0]).Cache.Summary {
		t.Fatalf("OpenAI object's metadata %v, want the cache line", v.Metadata)
	}
}
