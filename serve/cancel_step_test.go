package serve

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vdpp/vdpp/serve/job"
)

// TestCancelAtNextStep: with a slow model (a step is 300 ms), a cancel ends a running job
// at its next step boundary: it runs at most the step in flight after the cancel, not the
// rest of its steps (the time it took is logged against the step time).
func TestCancelAtNextStep(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a few 300 ms steps")
	}
	const stepMS = 300
	ts := startServer(t, Config{NProc: 2, MaxRunning: 1, Spec: ModelSpec{Name: "synthetic", StepMS: stepMS}})
	jb := ts.submit(testPNG(t, 2), `{"num_frames":1,"steps":30,"height":8,"width":8,"max_guidance":1}`)
	ts.waitStep(jb.ID, 2)
	t0 := time.Now()
	if resp, b := ts.do("DELETE", "/v1/videos/"+jb.ID, nil, ""); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("cancel: %d %s", resp.StatusCode, b)
	}
	at := ts.status(jb.ID).Progress.Step
	st := ts.wait(jb.ID, 30*time.Second)
	took := time.Since(t0)
	if st.State != job.StateCancelled || st.Progress.Step > at+1 {
		t.Fatalf("after a cancel at step %d: %+v, want cancelled within one more step", at, st)
	}
	t.Logf("cancel at step %d of 30 took %v (a step is %d ms); ended at step %d", at, took, stepMS, st.Progress.Step)
}

// TestHoldFile: while Config.HoldFile exists, a job that has run its first step stays
// running there (no later report is taken in), so a cancel shows as requested on a job
// that cannot end; once the file is removed the job ends cancelled, and the next job runs
// through unheld.
func TestHoldFile(t *testing.T) {
	hold := filepath.Join(t.TempDir(), "hold")
	if err := os.WriteFile(hold, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, Config{NProc: 1, HoldFile: hold, Spec: ModelSpec{Name: "synthetic"}})
	img := testPNG(t, 2)
	params := `{"num_frames":1,"steps":3,"height":8,"width":8}`
	held := ts.submit(img, params)
	ts.waitStep(held.ID, 1)
	if st := ts.status(held.ID); st.State != job.StateRunning || st.Progress.Step != 1 {
		t.Fatalf("held job: %+v, want running at step 1 of 3", st)
	}
	if resp, b := ts.do("DELETE", "/v1/videos/"+held.ID, nil, ""); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("cancel of the held job: %d %s, want 202", resp.StatusCode, b)
	}
	if st := ts.status(held.ID); st.State != job.StateRunning || !st.CancelRequested {
		t.Fatalf("held job after the cancel: %+v, want running with the cancel requested", st)
	}
	if err := os.Remove(hold); err != nil {
		t.Fatal(err)
	}
	if st := ts.wait(held.ID, 10*time.Second); st.State != job.StateCancelled {
		t.Fatalf("held job after the hold was lifted: %+v, want cancelled", st)
	}
	if st := ts.wait(ts.submit(img, params).ID, 10*time.Second); st.State != job.StateSucceeded {
		t.Fatalf("job after the hold: %+v, want succeeded", st)
	}
}
