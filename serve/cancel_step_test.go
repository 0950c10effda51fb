package serve

import (
	"net/http"
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
	deadline := time.Now().Add(30 * time.Second)
	for ts.status(jb.ID).Progress.Step < 2 {
		if time.Now().After(deadline) {
			t.Fatal("job never made progress")
		}
		time.Sleep(10 * time.Millisecond)
	}
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
