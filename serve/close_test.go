package serve

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/internal/wait"
	"github.com/vdpp/vdpp/serve/job"
	"github.com/vdpp/vdpp/serve/wire"
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
	s.coord.hooks.received = func(_ int, m comm.Message) {
		if op, _, _ := wire.Op(m); op == wire.OpResult {
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
	if !wait.For(10*time.Second, func() bool { j, w := s.coord.Ready(); return j == w }) {
		t.Fatal("worker never joined")
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

	store, _, err := openStore(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	recs, err := store.All()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].ID != st.ID || recs[0].State != job.StateSucceeded || recs[0].FinishedAt == nil {
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
	st, _, err := openStore(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c, err := newCoordinator(coordConfig{Model: syntheticModel(t), Store: st, NProc: 1})
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
		if err := tc.call(); !errors.Is(err, job.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", tc.name, err)
		}
	}
	recs, err := st.All()
	if err != nil || len(recs) != 1 || recs[0].State != job.StateQueued {
		t.Fatalf("store after Close: %+v, %v (want the one job, still queued)", recs, err)
	}
}
