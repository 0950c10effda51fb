package serve

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vdpp/vdpp/internal/wait"
	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/model/synthetic"
	"github.com/vdpp/vdpp/serve/job"
	"github.com/vdpp/vdpp/tensor"
)

func TestExpiredJobs(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	ago := func(d time.Duration) *time.Time { t := now.Add(-d); return &t }
	rec := func(id string, s job.State, created time.Duration, finished *time.Time) job.Record {
		return job.Record{ID: id, State: s, CreatedAt: now.Add(-created), FinishedAt: finished}
	}
	cases := []struct {
		name string
		recs []job.Record
		keep time.Duration
		want []string
	}{
		{"nothing", nil, time.Hour, nil},
		{"succeeded long ago", []job.Record{rec("a", job.StateSucceeded, 3*time.Hour, ago(2*time.Hour))}, time.Hour, []string{"a"}},
		{"failed long ago", []job.Record{rec("a", job.StateFailed, 3*time.Hour, ago(2*time.Hour))}, time.Hour, []string{"a"}},
		{"cancelled long ago", []job.Record{rec("a", job.StateCancelled, 3*time.Hour, ago(2*time.Hour))}, time.Hour, []string{"a"}},
		{"finished recently", []job.Record{rec("a", job.StateSucceeded, 3*time.Hour, ago(time.Minute))}, time.Hour, nil},
		{"exactly keep ago is kept", []job.Record{rec("a", job.StateSucceeded, 3*time.Hour, ago(time.Hour))}, time.Hour, nil},
		{"just over keep", []job.Record{rec("a", job.StateSucceeded, 3*time.Hour, ago(time.Hour+time.Nanosecond))}, time.Hour, []string{"a"}},
		{"finished in the future (clock step back)", []job.Record{rec("a", job.StateFailed, 0, ago(-time.Hour))}, time.Hour, nil},
		{"queued for days", []job.Record{rec("a", job.StateQueued, 72*time.Hour, nil)}, time.Hour, nil},
		{"running for days", []job.Record{rec("a", job.StateRunning, 72*time.Hour, ago(48*time.Hour))}, time.Hour, nil},
		{"finished without FinishedAt counts from creation", []job.Record{
			rec("old", job.StateSucceeded, 2*time.Hour, nil), rec("new", job.StateSucceeded, time.Minute, nil)}, time.Hour, []string{"old"}},
		{"keep 0 keeps forever", []job.Record{rec("a", job.StateSucceeded, 1000*time.Hour, ago(999*time.Hour))}, 0, nil},
		{"negative keep keeps forever", []job.Record{rec("a", job.StateSucceeded, 1000*time.Hour, ago(999*time.Hour))}, -time.Hour, nil},
		{"mixed, order kept", []job.Record{
			rec("s", job.StateSucceeded, 9*time.Hour, ago(8*time.Hour)),
			rec("q", job.StateQueued, 9*time.Hour, nil),
			rec("r", job.StateRunning, 9*time.Hour, nil),
			rec("f", job.StateFailed, 9*time.Hour, ago(30*time.Minute)),
			rec("c", job.StateCancelled, 9*time.Hour, ago(7*time.Hour)),
		}, 6 * time.Hour, []string{"s", "c"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			for _, r := range job.ExpiredJobs(c.recs, now, c.keep) {
				got = append(got, r.ID)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("ExpiredJobs = %v, want %v", got, c.want)
			}
		})
	}
}

func TestSweepInterval(t *testing.T) {
	cases := []struct {
		keep, want time.Duration
	}{
		{0, 0},
		{-time.Hour, 0},
		{time.Millisecond, time.Second},
		{5 * time.Second, time.Second},
		{time.Minute, 6 * time.Second},
		{2 * time.Hour, 12 * time.Minute},
		{10 * time.Hour, time.Hour},
		{job.DefaultKeepJobs, time.Hour},
	}
	for _, c := range cases {
		if got := sweepInterval(c.keep); got != c.want {
			t.Errorf("sweepInterval(%v) = %v, want %v", c.keep, got, c.want)
		}
	}
}

// fakeClock is a clock that moves only when told.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// gatedDenoiser blocks every call while held, until released or its worker stops.
type gatedDenoiser struct {
	model.Denoiser
	g *gate
}

type gate struct {
	mu   sync.Mutex
	open chan struct{} // nil: not held
}

func (g *gate) hold() { g.mu.Lock(); g.open = make(chan struct{}); g.mu.Unlock() }
func (g *gate) release() {
	g.mu.Lock()
	if g.open != nil {
		close(g.open)
		g.open = nil
	}
	g.mu.Unlock()
}

func (d gatedDenoiser) Predict(ctx context.Context, in model.Input) (*tensor.Dense, error) {
	d.g.mu.Lock()
	open := d.g.open
	d.g.mu.Unlock()
	if open != nil {
		select {
		case <-open:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return d.Denoiser.Predict(ctx, in)
}

// sweep triggers one sweep through the tick channel and returns once it has finished: the
// loop receives the second tick only after the first sweep returned.
func sweep(tick chan<- time.Time) {
	tick <- time.Time{}
	tick <- time.Time{}
}

// waitStored polls the store until job id's record is in state s.
func waitStored(t *testing.T, st *jobStore, id string, s job.State) {
	t.Helper()
	if !wait.For(10*time.Second, func() bool {
		recs, err := st.All()
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(recs, func(r job.Record) bool { return r.ID == id && r.State == s })
	}) {
		t.Fatalf("job %s never stored as %s", id, s)
	}
}

// TestRetentionSweep runs a server with a fake clock and a hand-driven sweep: finished jobs
// are deleted (404 like an unknown id, files and record gone, counted) once older than
// --keep-jobs; queued and running jobs never are, however old.
func TestRetentionSweep(t *testing.T) {
	clk := &fakeClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	tick := make(chan time.Time)
	g := &gate{}
	spec := ModelSpec{Name: "synthetic"}
	launcher := InProcLauncher{Spec: spec, NewDenoiser: func() (model.Denoiser, error) {
		d, err := synthetic.New(model.Config{})
		return gatedDenoiser{d, g}, err
	}}
	ts := startServer(t, Config{NProc: 1, MaxRunning: 1, Spec: spec, Launcher: launcher, StallTimeout: -1,
		KeepJobs: time.Hour, Now: clk.Now, SweepTick: tick})
	img := testPNG(t, 6)
	jobJSON := `{"num_frames":1,"steps":3,"height":8,"width":8,"seed":%d}`

	done := ts.wait(ts.submit(img, fmt.Sprintf(jobJSON, 1)).ID, 10*time.Second)
	if done.State != job.StateSucceeded {
		t.Fatalf("first job: %+v", done)
	}
	ts.do("GET", "/v1/videos/"+done.ID+"/content?format=gif", nil, "") // rendered files too
	g.hold()
	running := ts.submit(img, fmt.Sprintf(jobJSON, 2))
	queued := ts.submit(img, fmt.Sprintf(jobJSON, 3))
	cancelled := ts.submit(img, fmt.Sprintf(jobJSON, 4))

	type want struct {
		id    string
		state job.State // "" = deleted
	}
	check := func(stage string, ws ...want) {
		t.Helper()
		recs, err := ts.store.All()
		if err != nil {
			t.Fatal(err)
		}
		inStore := map[string]job.State{}
		for _, r := range recs {
			inStore[r.ID] = r.State
		}
		unknownResp, unknownBody := ts.do("GET", "/v1/videos/0123456789abcdef01234567", nil, "")
		for _, w := range ws {
			dir, _ := ts.store.JobDir(w.id)
			_, statErr := os.Stat(dir)
			if w.state == "" {
				for _, route := range []string{"", "/content", "/content?format=latent", "/events"} {
					resp, b := ts.do("GET", "/v1/videos/"+w.id+route, nil, "")
					if resp.StatusCode != unknownResp.StatusCode || strings.ReplaceAll(string(b), w.id, "0123456789abcdef01234567") != string(unknownBody) {
						t.Fatalf("%s: GET %s of an expired job: %d %s; an unknown id gets %d %s", stage, route, resp.StatusCode, b, unknownResp.StatusCode, unknownBody)
					}
				}
				if resp, _ := ts.do("DELETE", "/v1/videos/"+w.id, nil, ""); resp.StatusCode != http.StatusNotFound {
					t.Fatalf("%s: cancel of an expired job: %d", stage, resp.StatusCode)
				}
				if _, ok := inStore[w.id]; ok || !errors.Is(statErr, os.ErrNotExist) {
					t.Fatalf("%s: expired job %s: record kept %v, folder: %v", stage, w.id, ok, statErr)
				}
				continue
			}
			if st := ts.status(w.id); st.State != w.state {
				t.Fatalf("%s: job %s is %s, want %s", stage, w.id, st.State, w.state)
			}
			if _, ok := inStore[w.id]; !ok || statErr != nil {
				t.Fatalf("%s: kept job %s: record %v, folder: %v", stage, w.id, ok, statErr)
			}
		}
		if ents, err := os.ReadDir(filepath.Join(ts.cfg.DataDir, "trash")); err != nil || len(ents) != 0 {
			t.Fatalf("%s: trash not empty: %v %v", stage, ents, err)
		}
	}
	expired := func() float64 {
		_, m := ts.do("GET", "/metrics", nil, "")
		return countLine(string(m), "vdpp_jobs_expired_total")
	}

	sweep(tick) // nothing is old yet
	check("fresh", want{done.ID, job.StateSucceeded}, want{running.ID, job.StateRunning}, want{queued.ID, job.StateQueued}, want{cancelled.ID, job.StateQueued})

	clk.Advance(2 * time.Hour)
	if resp, b := ts.do("DELETE", "/v1/videos/"+cancelled.ID, nil, ""); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("cancel: %d %s", resp.StatusCode, b)
	}
	// A job whose final record is still being written is never expired (the write would
	// bring the record back); let it land so the +3h sweep below is not skipped.
	waitStored(t, ts.store, cancelled.ID, job.StateCancelled)
	sweep(tick)
	check("+2h", want{done.ID, ""}, want{running.ID, job.StateRunning}, want{queued.ID, job.StateQueued}, want{cancelled.ID, job.StateCancelled})
	if n := expired(); n != 1 {
		t.Fatalf("vdpp_jobs_expired_total %v, want 1", n)
	}

	clk.Advance(time.Hour + time.Second)
	sweep(tick)
	check("+3h", want{done.ID, ""}, want{running.ID, job.StateRunning}, want{queued.ID, job.StateQueued}, want{cancelled.ID, ""})

	g.release() // the old running job finishes now (fake time +3h), then the queued one
	for _, id := range []string{running.ID, queued.ID} {
		if st := ts.wait(id, 10*time.Second); st.State != job.StateSucceeded {
			t.Fatalf("job %s: %+v", id, st)
		}
	}
	sweep(tick)
	check("just finished", want{running.ID, job.StateSucceeded}, want{queued.ID, job.StateSucceeded})
	clk.Advance(time.Hour + time.Second)
	if n, err := ts.Sweep(); n != 2 || err != nil {
		t.Fatalf("Sweep = %d, %v; want 2 jobs", n, err)
	}
	check("+4h", want{done.ID, ""}, want{running.ID, ""}, want{queued.ID, ""}, want{cancelled.ID, ""})
	if n := expired(); n != 4 {
		t.Fatalf("vdpp_jobs_expired_total %v, want 4", n)
	}
	_, m := ts.do("GET", "/metrics", nil, "")
	if !containsLine(string(m), `vdpp_jobs{state="succeeded"} 0`) {
		t.Fatalf("expired jobs still counted:\n%s", m)
	}
}

// TestRetentionAtStartup: a server started on a data dir deletes, before it serves, the
// finished jobs already expired and what an interrupted delete left in the trash; a job
// folder without a record is moved to the quarantine, not deleted; everything else stays.
func TestRetentionAtStartup(t *testing.T) {
	now := time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	dir := t.TempDir()
	st, _, err := openStore(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	img := testPNG(t, 2)
	p := mustParams(t, `{"num_frames":1,"steps":2,"height":8,"width":8}`)
	recs := []job.Record{
		{ID: "00000000000000000000000a", Seq: 1, State: job.StateSucceeded, Params: p, CreatedAt: now.Add(-50 * time.Hour), FinishedAt: at(-49 * time.Hour)},
		{ID: "00000000000000000000000b", Seq: 2, State: job.StateFailed, Params: p, CreatedAt: now.Add(-2 * time.Hour), FinishedAt: at(-time.Hour), Error: "x"},
		{ID: "00000000000000000000000c", Seq: 3, State: job.StateQueued, Params: p, CreatedAt: now.Add(-100 * time.Hour)},
		{ID: "00000000000000000000000d", Seq: 4, State: job.StateCancelled, Params: p, CreatedAt: now.Add(-30 * time.Hour), FinishedAt: at(-25 * time.Hour)},
	}
	for _, r := range recs {
		if err := st.WriteFile(r.ID, inputFile, img); err != nil {
			t.Fatal(err)
		}
		if err := st.Put(r); err != nil {
			t.Fatal(err)
		}
	}
	const orphan = "00000000000000000000000e"
	if err := st.WriteFile(orphan, inputFile, img); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "trash", "00000000000000000000000f"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "jobs", "README"), []byte("not a job"), 0o644); err != nil {
		t.Fatal(err)
	}
	st.Close()

	s, err := New(Config{DataDir: dir, Spec: ModelSpec{Name: "synthetic"}, NProc: 1, KeepJobs: 24 * time.Hour,
		Now: func() time.Time { return now }, Launcher: InProcLauncher{Spec: ModelSpec{Name: "synthetic"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	left, err := s.store.All()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range left {
		ids = append(ids, r.ID)
	}
	if want := []string{recs[1].ID, recs[2].ID}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("records after start-up: %v, want %v", ids, want)
	}
	for _, c := range []struct {
		id   string
		kept bool
	}{{recs[0].ID, false}, {recs[1].ID, true}, {recs[2].ID, true}, {recs[3].ID, false}, {orphan, false}} {
		_, err := os.Stat(filepath.Join(dir, "jobs", c.id))
		if c.kept != (err == nil) {
			t.Errorf("job folder %s: %v, want kept %v", c.id, err, c.kept)
		}
		_, err = s.coord.Status(c.id)
		if c.kept != (err == nil) || (!c.kept && !errors.Is(err, job.ErrNotFound)) {
			t.Errorf("status of %s: %v, want kept %v", c.id, err, c.kept)
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "trash")); len(ents) != 0 {
		t.Errorf("trash after start-up: %v", ents)
	}
	if _, err := os.Stat(filepath.Join(dir, "jobs", "README")); err != nil {
		t.Errorf("a file that is not a job folder was touched: %v", err)
	}
	if q, _ := filepath.Glob(filepath.Join(dir, quarantineDir, "job-"+orphan+".*", inputFile)); len(q) != 1 {
		t.Errorf("the folder without a record is not in the quarantine: %v", q)
	}
}

func TestKeepJobsNegativeRefused(t *testing.T) {
	_, err := New(Config{DataDir: t.TempDir(), Spec: ModelSpec{Name: "synthetic"}, NProc: 1, KeepJobs: -time.Second})
	if err == nil || !strings.Contains(err.Error(), "--keep-jobs") {
		t.Fatalf("New with a negative KeepJobs: %v", err)
	}
}

// TestContentRacingExpiry: a job that expires between a download's status check and its
// file read answers 404 as an unknown id does, in every format, not a server error. The
// expiry runs inside the handler (hooks.contentRead), so the race is hit every time.
func TestContentRacingExpiry(t *testing.T) {
	clk := &fakeClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	ts := startServer(t, Config{NProc: 1, StallTimeout: -1, KeepJobs: time.Hour, Now: clk.Now, SweepTick: make(chan time.Time)})
	var expireErr error
	ts.hooks.contentRead = func(string) {
		clk.Advance(2 * time.Hour)
		if n, err := ts.Sweep(); n != 1 || err != nil {
			expireErr = fmt.Errorf("Sweep = %d, %v; want 1 job", n, err)
		}
	}
	unknownResp, unknownBody := ts.do("GET", "/v1/videos/0123456789abcdef01234567/content", nil, "")
	for i, route := range []string{"/content?format=latent", "/content", "/content?format=gif", "/content?format=gif (rendered before)"} {
		route, rendered := strings.CutSuffix(route, " (rendered before)")
		st := ts.wait(ts.submit(testPNG(t, 6), fmt.Sprintf(`{"num_frames":1,"steps":3,"height":8,"width":8,"seed":%d}`, i)).ID, 10*time.Second)
		if st.State != job.StateSucceeded {
			t.Fatalf("job: %+v", st)
		}
		waitStored(t, ts.store, st.ID, job.StateSucceeded)
		if rendered {
			hook := ts.hooks.contentRead
			ts.hooks.contentRead = nil
			if resp, b := ts.do("GET", "/v1/videos/"+st.ID+route, nil, ""); resp.StatusCode != http.StatusOK {
				t.Fatalf("first download: %d %s", resp.StatusCode, b)
			}
			ts.hooks.contentRead = hook
		}
		resp, b := ts.do("GET", "/v1/videos/"+st.ID+route, nil, "")
		if expireErr != nil {
			t.Fatal(expireErr)
		}
		if resp.StatusCode != unknownResp.StatusCode || strings.ReplaceAll(string(b), st.ID, "0123456789abcdef01234567") != string(unknownBody) {
			t.Errorf("GET %s racing expiry (rendered before: %v): %d %s; an unknown id gets %d %s", route, rendered, resp.StatusCode, b, unknownResp.StatusCode, unknownBody)
		}
	}
}
