package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vdpp/vdpp/internal/wait"
)

// serveProc is a `vdpp serve` process a test started (startServe), on 127.0.0.1:0.
type serveProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	client *http.Client // talks to it (serveOptions.client)
	url    string
	dir    string // data dir
	pids   string // worker pid file
	stderr *syncBuffer
	done   chan struct{} // closed once the process has exited (exitErr set)
	exit   error
}

// serveOptions say how startServe runs the server.
type serveOptions struct {
	// bin is the binary (default vdpp(t)); dir the data dir (default a new temporary one).
	bin, dir string
	// nofile > 0 runs it under `ulimit -n nofile` (through sh).
	nofile int
	// clean, at the end of the test, stops it with SIGTERM and fails unless it exits 0
	// within 20 s; otherwise it is killed.
	clean bool
	// command makes the process (default exec.Command): a network-namespace host's
	// Command runs it inside the host, with the environment it sets.
	command func(name string, args ...string) *exec.Cmd
	// client talks to the server (default http.DefaultClient): a namespace host's
	// HTTPClient reaches one that listens inside the host.
	client *http.Client
}

// startServe starts `vdpp serve --listen 127.0.0.1:0 --data-dir DIR --worker-pid-file
// PIDS ARGS...` and returns once it has printed its listening line and /readyz answers
// 200. The process ends with the test (see serveOptions.clean).
func startServe(t *testing.T, o serveOptions, args ...string) *serveProc {
	t.Helper()
	sp := startServeNoWait(t, o, args...)
	sp.waitReady()
	return sp
}

// startServeNoWait is startServe without waiting for /readyz.
func startServeNoWait(t *testing.T, o serveOptions, args ...string) *serveProc {
	t.Helper()
	if o.bin == "" {
		o.bin = vdpp(t)
	}
	if o.dir == "" {
		o.dir = filepath.Join(t.TempDir(), "data")
	}
	if o.command == nil {
		o.command = exec.Command
	}
	if o.client == nil {
		o.client = http.DefaultClient
	}
	sp := &serveProc{t: t, client: o.client, dir: o.dir, pids: o.dir + ".pids", stderr: &syncBuffer{}, done: make(chan struct{})}
	argv := append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", o.dir, "--worker-pid-file", sp.pids}, args...)
	if o.nofile > 0 {
		script := fmt.Sprintf(`ulimit -n %d && exec "$@"`, o.nofile)
		sp.cmd = o.command("sh", append([]string{"-c", script, "sh", o.bin}, argv...)...)
	} else {
		sp.cmd = o.command(o.bin, argv...)
	}
	sp.cmd.Stderr = sp.stderr
	stdout, err := sp.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sp.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sp.exit = sp.cmd.Wait()
		close(sp.done)
	}()
	t.Cleanup(func() {
		if !o.clean {
			sp.kill()
			return
		}
		if err := sp.stop(20 * time.Second); err != nil {
			t.Errorf("serve: %v\n%s", err, lastLines(sp.stderr.String(), 20))
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	m := regexp.MustCompile(`^listening on (http://127\.0\.0\.1:\d+)\n$`).FindStringSubmatch(line)
	if err != nil || m == nil {
		sp.kill()
		t.Fatalf("listening line %q, %v\n%s", line, err, sp.stderr.String())
	}
	sp.url = m[1]
	return sp
}

// waitReady polls /readyz until it answers 200 (60 s at most: every worker loads the model
// first, which takes far longer on a busy machine than on an idle one).
func (sp *serveProc) waitReady() {
	sp.t.Helper()
	sp.waitReadyz(http.StatusOK, 60*time.Second)
}

// waitReadyz polls /readyz until it answers want (200, or 503 once workers are lost), for
// limit at most.
func (sp *serveProc) waitReadyz(want int, limit time.Duration) {
	sp.t.Helper()
	if !wait.For(limit, func() bool {
		if r, err := sp.client.Get(sp.url + "/readyz"); err == nil {
			r.Body.Close()
			if r.StatusCode == want {
				return true
			}
		}
		select {
		case <-sp.done:
			sp.t.Fatalf("the server exited (%v)\n%s", sp.exit, sp.stderr.String())
		default:
		}
		return false
	}) {
		sp.t.Fatalf("/readyz never answered %d\n%s", want, lastLines(sp.stderr.String(), 20))
	}
}

// kill SIGKILLs the server (its workers die with it) and waits for it.
func (sp *serveProc) kill() {
	sp.cmd.Process.Kill()
	<-sp.done
}

// stop sends SIGTERM and waits at most timeout for an exit with status 0.
func (sp *serveProc) stop(timeout time.Duration) error {
	sp.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-sp.done:
		return sp.exit
	case <-time.After(timeout):
		sp.kill()
		return fmt.Errorf("did not stop on SIGTERM within %v", timeout)
	}
}

func (sp *serveProc) get(path string) (int, []byte) {
	sp.t.Helper()
	r, err := sp.client.Get(sp.url + path)
	if err != nil {
		sp.t.Fatalf("GET %s: %v", path, err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return r.StatusCode, b
}

// do sends a request without a body.
func (sp *serveProc) do(method, path string) (int, []byte) {
	sp.t.Helper()
	req, err := http.NewRequest(method, sp.url+path, nil)
	if err != nil {
		sp.t.Fatal(err)
	}
	r, err := sp.client.Do(req)
	if err != nil {
		sp.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return r.StatusCode, b
}

// submit posts a native job: parts by name (a "params" JSON, an "image" file, "prompt"
// text), and returns the status code and body.
func (sp *serveProc) submit(parts map[string][]byte) (int, []byte) {
	sp.t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for k, v := range parts {
		var fw io.Writer
		if k == "image" {
			fw, _ = mw.CreateFormFile("image", "a.png")
		} else {
			fw, _ = mw.CreateFormField(k)
		}
		fw.Write(v)
	}
	mw.Close()
	r, err := sp.client.Post(sp.url+"/v1/videos", mw.FormDataContentType(), &body)
	if err != nil {
		sp.t.Fatalf("submit: %v", err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return r.StatusCode, b
}

// mustSubmit submits an image job and returns its id (202 or the test fails).
func (sp *serveProc) mustSubmit(params string, img []byte) string {
	sp.t.Helper()
	code, b := sp.submit(map[string][]byte{"params": []byte(params), "image": img})
	var st struct{ ID string }
	json.Unmarshal(b, &st)
	if code != http.StatusAccepted || st.ID == "" {
		sp.t.Fatalf("submit: %d %s", code, b)
	}
	return st.ID
}

// serveStatus is what the tests read of a job's status.
type serveStatus struct {
	ID       string
	State    string
	Error    string
	Restarts int
	Timings  struct{ QueuedMS, RunMS, TotalMS float64 } `json:"timings"`
	Progress struct{ Step int }
	Params   struct{ Steps int }
}

func (sp *serveProc) status(id string) serveStatus {
	sp.t.Helper()
	code, b := sp.get("/v1/videos/" + id)
	var st serveStatus
	if err := json.Unmarshal(b, &st); code != 200 || err != nil {
		sp.t.Fatalf("status %s: %d %s", id, code, b)
	}
	return st
}

// wait polls job id until it has ended (timeout at most).
func (sp *serveProc) wait(id string, timeout time.Duration) serveStatus {
	sp.t.Helper()
	var st serveStatus
	if !wait.For(timeout, func() bool {
		st = sp.status(id)
		return st.State == "succeeded" || st.State == "failed" || st.State == "cancelled"
	}) {
		sp.t.Fatalf("job %s still %s\n%s", id, st.State, lastLines(sp.stderr.String(), 30))
	}
	return st
}

// waitStep polls job id until it has run at least step steps (timeout at most).
func (sp *serveProc) waitStep(id string, step int, timeout time.Duration) {
	sp.t.Helper()
	if !wait.For(timeout, func() bool { return sp.status(id).Progress.Step >= step }) {
		sp.t.Fatalf("job %s never reached step %d", id, step)
	}
}

// metric reads a sample of GET /metrics (the test fails without it).
func (sp *serveProc) metric(name string) float64 {
	sp.t.Helper()
	_, b := sp.get("/metrics")
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, name+" "); ok {
			var v float64
			fmt.Sscan(rest, &v)
			return v
		}
	}
	sp.t.Fatalf("no metric %s", name)
	return 0
}

// syncBuffer is a bytes.Buffer safe for a process's writes and the test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
