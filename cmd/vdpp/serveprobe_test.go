package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vdpp/vdpp/internal/wait"
	"github.com/vdpp/vdpp/serve/loadtest"
)

// openAICreate posts a multipart OpenAI create with fields (an "input_reference" value is
// sent as a file part) and returns the status code and body.
func openAICreate(t *testing.T, url string, fields map[string][]byte) (int, []byte) {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for k, v := range fields {
		if k == "input_reference" {
			fw, _ := mw.CreateFormFile(k, "a.png")
			fw.Write(v)
			continue
		}
		mw.WriteField(k, string(v))
	}
	mw.Close()
	r, err := http.Post(url+"/v1/videos", mw.FormDataContentType(), &body)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(r.Body)
	return r.StatusCode, b.Bytes()
}

// openAIError reads an OpenAI error body's param and code (both "" when the body is not in
// OpenAI's shape).
func openAIError(b []byte) (param, code string) {
	var e struct {
		Error struct {
			Param *string `json:"param"`
			Code  *string `json:"code"`
		} `json:"error"`
	}
	json.Unmarshal(b, &e)
	if e.Error.Param != nil {
		param = *e.Error.Param
	}
	if e.Error.Code != nil {
		code = *e.Error.Code
	}
	return param, code
}

// TestServeFaultProbeFindings: what a hostile probe of the real binary found, each answered
// as the API documents: a negative overlap is a 400 as a negative window is; "1_0" or a hex
// float is not a number of seconds; a content query parameter of the other API is a 400,
// not ignored; cancelling a cancelled job is a 409; a refused multipart OpenAI create is
// answered in OpenAI's shape; killing a worker that is restarting is never a 500.
func TestServeFaultProbeFindings(t *testing.T) {
	t.Parallel()
	sp := startServe(t, serveOptions{}, "--model", "synthetic", "--nproc", "1", "--step-ms", "20", "--max-running", "1",
		"--max-body-bytes", "100000")
	img := loadtest.TestImage(1)

	// Window fields: a negative overlap is refused as a negative window is.
	for params, want := range map[string]string{
		`{"num_frames":20,"overlap":-1}`: "overlap -1 must be in [0, 1048576]",
		`{"num_frames":20,"window":-2}`:  "window -2 must be in [1, 1048576]",
	} {
		code, b := sp.submit(map[string][]byte{"params": []byte(params), "image": img})
		if code != http.StatusBadRequest || !strings.Contains(string(b), want) {
			t.Errorf("%s: %d %s, want 400 with %q", params, code, b, want)
		}
	}

	// Seconds are decimal numbers.
	for _, sec := range []string{"1_0", "0x1p3", "Inf"} {
		code, b := openAICreate(t, sp.url, map[string][]byte{"model": []byte("synthetic"), "prompt": []byte("x"),
			"seconds": []byte(sec), "input_reference": img})
		if param, _ := openAIError(b); code != http.StatusBadRequest || param != "seconds" {
			t.Errorf("seconds %q: %d %s, want a 400 naming seconds", sec, code, b)
		}
	}

	// A finished job: each API's content route refuses the other's query parameter.
	done := sp.mustSubmit(`{"num_frames":1,"steps":2,"height":8,"width":8}`, img)
	if st := sp.wait(done, 20*time.Second); st.State != "succeeded" {
		t.Fatalf("job: %+v", st)
	}
	if code, b := sp.get("/v1/videos/" + done + "/content?variant=thumbnail"); code != http.StatusBadRequest || !strings.Contains(string(b), "variant") {
		t.Errorf("native content with variant: %d %s", code, b)
	}
	if code, b := sp.get("/v1/videos/video_" + done + "/content?format=gif"); code != http.StatusBadRequest {
		t.Errorf("OpenAI content with format: %d %s", code, b)
	} else if param, _ := openAIError(b); param != "format" {
		t.Errorf("OpenAI content with format: %s, want param format", b)
	}

	// A queued job (behind a running one) cancelled twice: 202, then 409.
	running := sp.mustSubmit(`{"num_frames":1,"steps":40,"height":8,"width":8}`, img)
	queued := sp.mustSubmit(`{"num_frames":1,"steps":2,"height":8,"width":8}`, img)
	if st := sp.status(queued); st.State != "queued" {
		t.Fatalf("second job %s, want queued behind %s", st.State, running)
	}
	if code, b := sp.do("DELETE", "/v1/videos/"+queued); code != http.StatusAccepted {
		t.Fatalf("cancel of a queued job: %d %s", code, b)
	}
	if code, b := sp.do("DELETE", "/v1/videos/"+queued); code != http.StatusConflict {
		t.Errorf("cancel of a cancelled job: %d %s, want 409", code, b)
	}
	if code, b := sp.do("POST", "/v1/videos/video_"+queued+"/cancel"); code != http.StatusConflict {
		t.Errorf("OpenAI cancel of a cancelled job: %d %s, want 409", code, b)
	}

	// A multipart OpenAI create over --max-body-bytes: refused in OpenAI's shape.
	code, b := openAICreate(t, sp.url, map[string][]byte{"model": []byte("synthetic"), "prompt": []byte("x"),
		"input_reference": bytes.Repeat([]byte{1}, 200000)})
	if _, c := openAIError(b); code != http.StatusRequestEntityTooLarge || c != "body_too_large" {
		t.Errorf("OpenAI create over the body limit: %d %s, want 413 in OpenAI's shape", code, b)
	}

	// Killing the worker, then killing it again while it restarts: 202 or 409, never 500.
	for i := range 2 {
		if code, b := sp.do("POST", "/v1/admin/workers/0/kill"); code != http.StatusAccepted && code != http.StatusConflict {
			t.Errorf("kill %d: %d %s", i, code, b)
		}
	}
	sp.waitReady()
	if st := sp.wait(running, 60*time.Second); st.State != "succeeded" {
		t.Errorf("the running job after the kills: %+v", st)
	}
}

// TestServeFaultDiskFull: a data dir with less free space than --min-free-space keeps
// refuses submissions up front with 507 (none is accepted to fail later) and /readyz
// answers 503 saying the storage is unavailable.
func TestServeFaultDiskFull(t *testing.T) {
	t.Parallel()
	sp := startServeNoWait(t, serveOptions{}, "--model", "synthetic", "--nproc", "1", "--min-free-space", "1000000TiB")
	var code int
	var b []byte
	var r struct {
		Workers, Nproc int
		Storage        string
	}
	if !wait.For(15*time.Second, func() bool {
		code, b = sp.get("/readyz")
		r.Workers, r.Nproc = 0, 0
		json.Unmarshal(b, &r)
		return r.Workers == r.Nproc && r.Nproc > 0
	}) {
		t.Fatalf("workers never joined: %s", b)
	}
	if code != http.StatusServiceUnavailable || r.Storage != "unavailable" {
		t.Fatalf("/readyz with the disk full: %d %s", code, b)
	}
	for i := range 3 {
		code, b := sp.submit(map[string][]byte{"params": []byte(fmt.Sprintf(`{"num_frames":1,"steps":2,"height":8,"width":8,"seed":%d}`, i)),
			"image": loadtest.TestImage(1)})
		if code != http.StatusInsufficientStorage || !strings.Contains(string(b), "insufficient_storage") || strings.Contains(string(b), "/") {
			t.Fatalf("submit with the disk full: %d %s", code, b)
		}
	}
	if n := sp.metric("vdpp_jobs_submitted_total"); n != 0 {
		t.Fatalf("%v jobs accepted with the disk full", n)
	}
}

// TestServeProbeF7PidFileAfterUnitRestart: --worker-pid-file kept a dead rank's pid after a
// cfg unit restarted (both members restart at once, and a stale write of one landed after
// the fresh one). The file is rewritten for every exit and restart, in order: once the unit
// has formed again it lists exactly the live ranks' pids.
func TestServeProbeF7PidFileAfterUnitRestart(t *testing.T) {
	t.Parallel()
	sp := startServe(t, serveOptions{}, "--model", "synthetic", "--nproc", "2", "--cfg", "2")
	before := readPids(t, sp.pids)
	if len(before) != 2 {
		t.Fatalf("pids %v", before)
	}
	for round := range 3 {
		if err := syscall.Kill(before[1], syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		var live []int
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			_, b := sp.get("/v1/admin/workers")
			var ws []struct {
				Pid        int  `json:"pid"`
				Connected  bool `json:"connected"`
				Restarting bool `json:"restarting"`
			}
			json.Unmarshal(b, &ws)
			live = live[:0]
			for _, w := range ws {
				if w.Connected && !w.Restarting && w.Pid != before[0] && w.Pid != before[1] {
					live = append(live, w.Pid)
				}
			}
			if len(live) == 2 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the unit never came back: %s\n%s", round, b, lastLines(sp.stderr.String(), 20))
			}
		}
		sp.waitReady()
		slices.Sort(live)
		// The file is written just after each start: it may trail the join by a moment,
		// never by more.
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			got := readPids(t, sp.pids)
			slices.Sort(got)
			if slices.Equal(got, live) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the pid file lists %v, the live ranks are %v", round, got, live)
			}
		}
		before = readPids(t, sp.pids)
	}
}
