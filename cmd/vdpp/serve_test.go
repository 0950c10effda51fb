package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vdpp/vdpp/internal/wait"
	"github.com/vdpp/vdpp/serve/loadtest"
)

// TestServeBinary runs the real `vdpp serve` with worker processes: the one listening line,
// a job end to end, a SIGKILLed worker that is restarted while jobs still complete
// bit-identically (checked by `vdpp loadtest --verify`), and a clean SIGTERM shutdown.
func TestServeBinary(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sp := startServe(t, serveOptions{dir: filepath.Join(dir, "data")}, "--model", "synthetic", "--nproc", "3", "--step-ms", "2")
	url, pids, stderr := sp.url, sp.pids, sp.stderr

	// One job by hand: submit, follow, download the MP4.
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, _ := mw.CreateFormField("params")
	fw.Write([]byte(`{"num_frames":2,"steps":6,"height":16,"width":16,"seed":5}`))
	fw, _ = mw.CreateFormFile("image", "a.png")
	fw.Write(loadtest.TestImage(5))
	mw.Close()
	resp, err := http.Post(url+"/v1/videos", mw.FormDataContentType(), &body)
	if err != nil {
		t.Fatal(err)
	}
	var st struct{ ID, State string }
	json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || st.ID == "" {
		t.Fatalf("submit: %d %+v", resp.StatusCode, st)
	}
	if !wait.For(10*time.Second, func() bool {
		r, err := http.Get(url + "/v1/videos/" + st.ID)
		if err != nil {
			t.Fatal(err)
		}
		json.NewDecoder(r.Body).Decode(&st)
		r.Body.Close()
		return st.State == "succeeded"
	}) {
		t.Fatalf("job still %s", st.State)
	}
	r, err := http.Get(url + "/v1/videos/" + st.ID + "/content")
	if err != nil {
		t.Fatal(err)
	}
	mp4, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != 200 || len(mp4) < 8 || string(mp4[4:8]) != "ftyp" {
		t.Fatalf("mp4: %d, %d bytes", r.StatusCode, len(mp4))
	}

	// Load with a rank killed (SIGKILL through the pid file) every 300 ms, verified.
	report := filepath.Join(dir, "lt.json")
	lt := exec.Command(vdpp(t), "loadtest", "--url", url, "--clients", "6", "--duration", "1500ms", "--verify",
		"--kill-every", "300ms", "--kill-rank-pid-file", pids, "--json", report)
	if out, err := lt.CombinedOutput(); err != nil {
		t.Fatalf("loadtest: %v\n%s\nserver:\n%s", err, out, stderr.String())
	}
	var rep loadtest.Report
	b, _ := os.ReadFile(report)
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Kills < 1 || rep.Completed == 0 || rep.Completed != rep.Submitted || *rep.OutputsMismatched != 0 || *rep.OutputsVerified != rep.Completed {
		t.Fatalf("report %s", b)
	}
	sp.waitReady() // every rank came back

	// SIGTERM: the server and its workers exit.
	workerPids := readPids(t, pids)
	if err := sp.stop(10 * time.Second); err != nil {
		t.Fatalf("server exit: %v\n%s", err, stderr.String())
	}
	wait.For(5*time.Second, func() bool {
		for _, pid := range workerPids {
			if syscall.Kill(pid, 0) == nil {
				return false
			}
		}
		return true
	})
	for _, pid := range workerPids {
		if syscall.Kill(pid, 0) == nil {
			t.Errorf("worker pid %d survived the server", pid)
		}
	}
}

func readPids(t *testing.T, path string) []int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var rank, pid int
		if n, _ := fmt.Sscan(l, &rank, &pid); n == 2 {
			out = append(out, pid)
		}
	}
	return out
}
