package serve

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vdpp/vdpp/serve/job"
)

// TestDiskNearlyFull: with less free space than the data dir keeps, a submission is
// refused up front with 507 (not accepted and failed later), /readyz answers 503, and the
// first download of a finished job is a 507 rather than a 500; with room again, all work.
func TestDiskNearlyFull(t *testing.T) {
	var free atomic.Int64
	free.Store(1 << 40)
	ts := startServer(t, Config{MinFreeBytes: 64 << 20, freeBytes: func() (int64, error) { return free.Load(), nil }})
	img := testPNG(t, 1)
	done := ts.wait(ts.submit(img, `{"num_frames":1,"steps":2,"height":8,"width":8}`).ID, 10*time.Second)
	if done.State != job.StateSucceeded {
		t.Fatalf("job with room: %+v", done)
	}
	free.Store(400 << 10) // 400 KB
	body, ct := multipartBody(t, img, `{"num_frames":1,"steps":2,"height":8,"width":8}`)
	resp, b := ts.do("POST", "/v1/videos", body, ct)
	if resp.StatusCode != http.StatusInsufficientStorage || !strings.Contains(string(b), "insufficient_storage") {
		t.Fatalf("submit on a nearly full disk: %d %s", resp.StatusCode, b)
	}
	if n, _ := ts.coord.Counts(); n[job.StateQueued]+n[job.StateRunning] != 0 {
		t.Fatalf("the refused job was queued: %v", n)
	}
	if resp, b := ts.do("GET", "/readyz", nil, ""); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), `"storage": "unavailable"`) {
		t.Fatalf("/readyz on a nearly full disk: %d %s", resp.StatusCode, b)
	}
	if resp, b := ts.do("GET", "/v1/videos/"+done.ID+"/content", nil, ""); resp.StatusCode != http.StatusInsufficientStorage {
		t.Fatalf("first download on a nearly full disk: %d %s", resp.StatusCode, b)
	}
	free.Store(1 << 40)
	if resp, b := ts.do("GET", "/v1/videos/"+done.ID+"/content", nil, ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("download with room again: %d %s", resp.StatusCode, b)
	}
	if resp, _ := ts.do("GET", "/readyz", nil, ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("/readyz with room again: %d", resp.StatusCode)
	}
}
