package serve

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vdpp/vdpp/internal/wait"
	"github.com/vdpp/vdpp/serve/job"
)

func TestValidID(t *testing.T) {
	for _, c := range []struct {
		id   string
		want bool
	}{
		{newID(), true},
		{strings.Repeat("a", 16), true},
		{strings.Repeat("a", 64), true},
		{strings.Repeat("a", 15), false},
		{strings.Repeat("a", 65), false},
		{strings.Repeat("a", 1<<16), false},
		{"ABCDEF0123456789ABCDEF01", false},
		{"../../etc/passwd00000000", false},
		{"", false},
	} {
		if got := job.ValidID(c.id); got != c.want {
			t.Errorf("ValidID(%.40q) = %v, want %v", c.id, got, c.want)
		}
	}
	if len(newID()) != idLen {
		t.Errorf("newID has %d characters, want %d", len(newID()), idLen)
	}
}

func TestRetryDelay(t *testing.T) {
	for _, c := range []struct {
		attempt int
		want    time.Duration
	}{
		{0, 20 * time.Millisecond}, {1, 40 * time.Millisecond}, {6, 1280 * time.Millisecond},
		{7, 2 * time.Second}, {40, 2 * time.Second}, {1000, 2 * time.Second},
	} {
		if got := retryDelay(c.attempt); got != c.want {
			t.Errorf("retryDelay(%d) = %v, want %v", c.attempt, got, c.want)
		}
	}
	var sum time.Duration
	for a := 0; a+1 < outputAttempts; a++ {
		sum += retryDelay(a)
	}
	if sum < 2*time.Second || sum > 5*time.Second {
		t.Errorf("an output write is retried for %v; want a few seconds", sum)
	}
}

// TestHTTPGuards: 405 JSON for a wrong method, ids checked before lookup and never echoed
// when malformed, a case-insensitive Bearer scheme, /healthz closing its connection.
func TestHTTPGuards(t *testing.T) {
	ts := startServer(t, Config{NProc: 1, Token: "s3cret"})
	auth := []string{"Authorization", "bearer s3cret"}
	for _, c := range []struct{ method, path, allow string }{
		{"PUT", "/v1/videos", "GET, HEAD, POST"}, // GET lists (the OpenAI API)
		{"POST", "/healthz", "GET, HEAD"},
		{"PATCH", "/v1/videos/" + newID(), "DELETE, GET, HEAD"},
	} {
		resp, b := ts.do(c.method, c.path, nil, "", auth...)
		var e apiError
		mustJSON(t, b, &e)
		if resp.StatusCode != http.StatusMethodNotAllowed || e.Code != "method_not_allowed" || resp.Header.Get("Allow") != c.allow {
			t.Errorf("%s %s: %d %q Allow %q, want 405 method_not_allowed Allow %q", c.method, c.path, resp.StatusCode, e.Code, resp.Header.Get("Allow"), c.allow)
		}
	}
	long := strings.Repeat("deadbeef", 4096)
	for _, path := range []string{"/v1/videos/" + long, "/v1/videos/" + long + "/events", "/v1/videos/XYZ/content"} {
		for _, method := range []string{"GET", "DELETE"} {
			if method == "DELETE" && strings.Count(path, "/") > 3 {
				continue
			}
			resp, b := ts.do(method, path, nil, "", auth...)
			if resp.StatusCode != http.StatusNotFound || strings.Contains(string(b), "deadbeefdeadbeef") || strings.Contains(string(b), "XYZ") {
				t.Errorf("%s %.40s: %d %s", method, path, resp.StatusCode, b)
			}
		}
	}
	for _, h := range []string{"Bearer s3cret", "BEARER s3cret", "bearer  s3cret"} {
		if resp, b := ts.do("GET", "/metrics", nil, "", "Authorization", h); resp.StatusCode != http.StatusOK {
			t.Errorf("Authorization %q: %d %s", h, resp.StatusCode, b)
		}
	}
	if resp, _ := ts.do("GET", "/metrics", nil, "", "Authorization", "Basic s3cret"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("Basic scheme: %d, want 401", resp.StatusCode)
	}
	if resp, _ := ts.do("GET", "/healthz", nil, ""); resp.StatusCode != http.StatusOK || !resp.Close {
		t.Errorf("/healthz: %d, close %v; want 200 and Connection: close", resp.StatusCode, resp.Close)
	}
}

// breakStorage replaces DIR/jobs with a plain file, so no job file can be written (this
// works for root too, unlike a chmod); the returned function puts the folder back.
func breakStorage(t *testing.T, dir string) func() {
	t.Helper()
	jobs, away := filepath.Join(dir, "jobs"), filepath.Join(dir, "jobs.away")
	if err := os.Rename(jobs, away); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(jobs, []byte("not a folder"), 0o644); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := os.Remove(jobs); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(away, jobs); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStorageUnwritable: with the data dir unwritable, submissions get 503 with a generic
// message (no path), /readyz says 503 storage unavailable, a job whose output cannot be
// written ends failed (counted, durable: it is still failed after a restart, not queued),
// and once the storage is back the server takes jobs again.
func TestStorageUnwritable(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{DataDir: dir, NProc: 1, Spec: ModelSpec{Name: "synthetic", StepMS: 40}}
	ts := startServer(t, cfg)
	img := testPNG(t, 2)
	running := ts.submit(img, `{"num_frames":1,"steps":5,"height":8,"width":8}`)
	ts.waitStep(running.ID, 1)
	restore := breakStorage(t, dir)
	body, ct := multipartBody(t, img, `{"num_frames":1,"steps":2,"height":8,"width":8}`)
	resp, b := ts.do("POST", "/v1/videos", body, ct)
	var e apiError
	mustJSON(t, b, &e)
	if resp.StatusCode != http.StatusServiceUnavailable || e.Code != "storage_unavailable" || strings.Contains(string(b), dir) || strings.Contains(string(b), "/") {
		t.Fatalf("submit with broken storage: %d %s", resp.StatusCode, b)
	}
	if resp, b := ts.do("GET", "/readyz", nil, ""); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), `"storage": "unavailable"`) {
		t.Fatalf("/readyz with broken storage: %d %s", resp.StatusCode, b)
	}
	st := ts.wait(running.ID, 20*time.Second)
	if st.State != job.StateFailed || strings.Contains(st.Error, dir) {
		t.Fatalf("job whose output could not be written: %+v", st)
	}
	_, mb := ts.do("GET", "/metrics", nil, "")
	if n := countLine(string(mb), "vdpp_jobs_failed_total"); n != 1 {
		t.Errorf("vdpp_jobs_failed_total %v, want 1", n)
	}
	restore()
	var ready *http.Response
	var rb []byte
	if !wait.For(5*time.Second, func() bool {
		ready, rb = ts.do("GET", "/readyz", nil, "")
		return ready.StatusCode == http.StatusOK
	}) {
		t.Fatalf("/readyz after the storage came back: %d %s", ready.StatusCode, rb)
	}
	next := ts.submit(img, `{"num_frames":1,"steps":2,"height":8,"width":8}`)
	if st := ts.wait(next.ID, 10*time.Second); st.State != job.StateSucceeded {
		t.Fatalf("job after the storage came back: %+v", st)
	}
	ts.Close()
	ts2 := startServer(t, cfg)
	if st := ts2.status(running.ID); st.State != job.StateFailed {
		t.Fatalf("failed job after a restart: %s, want failed", st.State)
	}
}

// TestCancelNeverSucceeds races DELETE against the end of short jobs: a 202 means the job
// ends cancelled, a 409 that it had already finished.
func TestCancelNeverSucceeds(t *testing.T) {
	ts := startServer(t, Config{NProc: 2, Spec: ModelSpec{Name: "synthetic", StepMS: 1}})
	img := testPNG(t, 3)
	const n = 40
	var wg sync.WaitGroup
	var mu sync.Mutex
	accepted := map[string]bool{}
	for i := 0; i < n; i++ {
		st := ts.submit(img, fmt.Sprintf(`{"num_frames":1,"steps":2,"height":8,"width":8,"seed":%d}`, i))
		wg.Add(1)
		go func(id string, delay time.Duration) {
			defer wg.Done()
			// Not ordering: the delays spread the DELETEs over the jobs' short lives, so
			// some land before the end and some after; the test holds whichever wins.
			time.Sleep(delay)
			resp, b := ts.do("DELETE", "/v1/videos/"+id, nil, "")
			mu.Lock()
			defer mu.Unlock()
			switch resp.StatusCode {
			case http.StatusAccepted:
				accepted[id] = true
			case http.StatusConflict:
				accepted[id] = false
			default:
				t.Errorf("DELETE: %d %s", resp.StatusCode, b)
			}
		}(st.ID, time.Duration(i%8)*time.Millisecond)
	}
	wg.Wait()
	cancelled := 0
	for _, acc := range accepted {
		if acc {
			cancelled++
		}
	}
	t.Logf("%d of %d DELETEs accepted", cancelled, len(accepted))
	for id, acc := range accepted {
		st := ts.wait(id, 10*time.Second)
		if acc && st.State != job.StateCancelled || !acc && st.State == job.StateCancelled {
			t.Errorf("job %s: DELETE accepted %v, ended %s", id, acc, st.State)
		}
	}
}

// TestRestartsAndTimings: restarts counts the server restarts an unfinished job lived
// through; a cancel accepted for a running job holds across a restart; a finished job keeps
// its timings.
func TestRestartsAndTimings(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{DataDir: dir, NProc: 1, MaxRunning: 2, Spec: ModelSpec{Name: "synthetic", StepMS: 100}}
	img := testPNG(t, 5)
	ts := startServer(t, cfg)
	long := ts.submit(img, `{"num_frames":1,"steps":50,"height":8,"width":8}`)
	short := ts.submit(img, `{"num_frames":1,"steps":3,"height":8,"width":8}`)
	ts.waitStep(long.ID, 1)
	if resp, b := ts.do("DELETE", "/v1/videos/"+long.ID, nil, ""); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("cancel: %d %s", resp.StatusCode, b)
	}
	ts.Close() // before the next step boundary: the cancel lives in the store only
	ts = startServer(t, cfg)
	if st := ts.status(long.ID); st.State != job.StateCancelled {
		t.Fatalf("cancelled running job after a restart: %s", st.State)
	}
	if st := ts.status(short.ID); st.Restarts != 1 {
		t.Fatalf("restarts after one server restart: %d", st.Restarts)
	}
	ts.Close()
	ts = startServer(t, cfg)
	st := ts.wait(short.ID, 10*time.Second)
	if st.State != job.StateSucceeded || st.Restarts != 2 {
		t.Fatalf("after two restarts: %s, restarts %d", st.State, st.Restarts)
	}
	ts.Close()
	ts = startServer(t, cfg)
	again := ts.status(short.ID)
	if again.Timings != st.Timings || again.Timings.RunMS <= 0 {
		t.Fatalf("timings %+v before the restart, %+v after", st.Timings, again.Timings)
	}
}
