package serve

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/tensor"
)

// TestCloseRecordsReceivedResult: the coordinator has received a job's last result when
// Close begins. Close must handle it and wait for its writes before closing the store, so
// the reopened store has the job succeeded with the right latent. The read loop is held
// (hooks.received) until Close has stopped taking work (hooks.draining); a Close that does
// not wait for read loops returns before that and fails the test, with no timing involved.
func TestCloseRecordsReceivedResult(t *testing.T) {
	dir := t.TempDir()
	spec := ModelSpec{Name: "synthetic"}
	s, err := New(Config{DataDir: dir, Listen: "127.0.0.1:0", Spec: spec, NProc: 1, Launcher: InProcLauncher{Spec: spec}})
	if err != nil {
		t.Fatal(err)
	}
	got, release, draining := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var once sync.Once
	s.coord.hooks.received = func(m comm.Message) {
		if op, _, _ := msgOp(m); op == opResult {
			once.Do(func() { close(got); <-release })
		}
	}
	s.coord.hooks.draining = func() { close(draining) }
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
		s.Close()
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if j, w := s.coord.Ready(); j == w {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("worker never joined")
		}
	}
	img := testPNG(t, 7)
	p := mustParams(t, `{"num_frames":2,"steps":4,"height":8,"width":16,"seed":9,"max_guidance":2}`)
	st, err := s.coord.Submit(p, img)
	if err != nil {
		t.Fatal(err)
	}
	<-got // the worker's result (all 4 steps: one rank, one stage) is in the read loop
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a received result was still unhandled", err)
	case <-draining:
	}
	close(release)
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}

	store, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	recs, err := store.All()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].ID != st.ID || recs[0].State != StateSucceeded || recs[0].FinishedAt == nil {
		t.Fatalf("records after Close: %+v", recs)
	}
	b, err := store.ReadFile(st.ID, finalFile)
	if err != nil {
		t.Fatal(err)
	}
	lat, err := DecodeLatent(b, recs[0].LatentShape)
	if err != nil {
		t.Fatal(err)
	}
	if !tensor.BitEqual(lat, reference(t, img, p)) {
		t.Fatal("recorded latent differs from the one-process run")
	}
}

// TestClosedCoordinatorRefuses: once Close has begun, nothing that would write to the
// store starts.
func TestClosedCoordinatorRefuses(t *testing.T) {
	st, err := OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c, err := NewCoordinator(CoordConfig{Model: syntheticModel(t), Store: st, NProc: 1})
	if err != nil {
		t.Fatal(err)
	}
	p := mustParams(t, `{"num_frames":1,"steps":2,"height":8,"width":8}`)
	queued, err := c.Submit(p, testPNG(t, 1))
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	cases := []struct {
		name string
		call func() error
	}{
		{"submit", func() error { _, err := c.Submit(p, testPNG(t, 1)); return err }},
		{"cancel", func() error { _, err := c.Cancel(queued.ID); return err }},
		{"expire", func() error { _, err := c.Expire(time.Now().Add(1000*time.Hour), time.Hour); return err }},
	}
	for _, tc := range cases {
		if err := tc.call(); !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", tc.name, err)
		}
	}
	recs, err := st.All()
	if err != nil || len(recs) != 1 || recs[0].State != StateQueued {
		t.Fatalf("store after Close: %+v, %v (want the one job, still queued)", recs, err)
	}
}

// TestExpireSkipsPendingWrite: a finished job whose record write is still in flight is not
// expired (the write would put the deleted record back); the next sweep takes it.
func TestExpireSkipsPendingWrite(t *testing.T) {
	st, err := OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c, err := NewCoordinator(CoordConfig{Model: syntheticModel(t), Store: st, NProc: 1, MaxRunning: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p := mustParams(t, `{"num_frames":1,"steps":2,"height":8,"width":8}`)
	c.Submit(p, testPNG(t, 1)) // holds the one slot (no worker ever runs it)
	queued, err := c.Submit(p, testPNG(t, 2))
	if err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	j := c.jobs[queued.ID]
	j.writes++ // a write that has not finished yet (released below)
	c.mu.Unlock()
	if _, err := c.Cancel(queued.ID); err != nil {
		t.Fatal(err)
	}
	// Let the cancel's own record write land; the fake one stays.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		c.mu.Lock()
		n := j.writes
		c.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cancel's write never finished (%d in flight)", n)
		}
	}
	later := time.Now().Add(48 * time.Hour)
	if n, err := c.Expire(later, time.Hour); n != 0 || err != nil {
		t.Fatalf("Expire with a write in flight = %d, %v; want 0", n, err)
	}
	c.mu.Lock()
	j.writes--
	c.mu.Unlock()
	if n, err := c.Expire(later, time.Hour); n != 1 || err != nil {
		t.Fatalf("Expire once the write is done = %d, %v; want 1", n, err)
	}
	if _, err := c.Status(queued.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("status of the expired job: %v", err)
	}
}
