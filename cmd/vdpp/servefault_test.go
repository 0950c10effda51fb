package main

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vdpp/vdpp/serve/loadtest"
)

// The fault suite: the real `vdpp serve` binary on loopback (port 0), each test a few
// seconds, bounded in connections, jobs and time.

// faultServer is a running `vdpp serve` started through sh, so a test can set its
// descriptor limit first.
type faultServer struct {
	t      *testing.T
	cmd    *exec.Cmd
	url    string
	dir    string // data dir
	pids   string // worker pid file
	stderr *syncBuffer
}

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

// startFault starts the server on 127.0.0.1:0 with data dir dir and waits until ready.
// nofile > 0 runs it under `ulimit -n nofile`.
func startFault(t *testing.T, dir string, nofile int, args ...string) *faultServer {
	t.Helper()
	return startFaultBin(t, vdppBin, dir, nofile, args...)
}

func startFaultBin(t *testing.T, bin, dir string, nofile int, args ...string) *faultServer {
	t.Helper()
	fs := &faultServer{t: t, dir: dir, pids: dir + ".pids", stderr: &syncBuffer{}}
	argv := append([]string{"serve", "--listen", "127.0.0.1:0", "--model", "synthetic", "--data-dir", dir,
		"--worker-pid-file", fs.pids}, args...)
	script := `exec "$@"`
	if nofile > 0 {
		script = fmt.Sprintf(`ulimit -n %d && exec "$@"`, nofile)
	}
	fs.cmd = exec.Command("sh", append([]string{"-c", script, "sh", bin}, argv...)...)
	fs.cmd.Stderr = fs.stderr
	stdout, err := fs.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.cmd.Process.Kill(); fs.cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	m := regexp.MustCompile(`^listening on (http://127\.0\.0\.1:\d+)\n$`).FindStringSubmatch(line)
	if err != nil || m == nil {
		t.Fatalf("listening line %q, %v\n%s", line, err, fs.stderr.String())
	}
	fs.url = m[1]
	waitReady(t, fs.url)
	return fs
}

// kill SIGKILLs the server (its workers die with it).
func (fs *faultServer) kill() {
	fs.cmd.Process.Kill()
	fs.cmd.Wait()
}

func (fs *faultServer) get(path string) (int, []byte) {
	fs.t.Helper()
	r, err := http.Get(fs.url + path)
	if err != nil {
		fs.t.Fatalf("GET %s: %v", path, err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return r.StatusCode, b
}

// submit posts a job with the test image k and returns the status code and body.
func (fs *faultServer) submit(params string, img []byte) (int, []byte) {
	fs.t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, _ := mw.CreateFormField("params")
	fw.Write([]byte(params))
	fw, _ = mw.CreateFormFile("image", "a.png")
	fw.Write(img)
	mw.Close()
	r, err := http.Post(fs.url+"/v1/videos", mw.FormDataContentType(), &body)
	if err != nil {
		fs.t.Fatalf("submit: %v", err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return r.StatusCode, b
}

func (fs *faultServer) mustSubmit(params string) string {
	fs.t.Helper()
	code, b := fs.submit(params, loadtest.TestImage(3))
	var st struct{ ID string }
	json.Unmarshal(b, &st)
	if code != http.StatusAccepted || st.ID == "" {
		fs.t.Fatalf("submit: %d %s", code, b)
	}
	return st.ID
}

type faultStatus struct {
	State    string
	Error    string
	Restarts int
	Timings  struct{ QueuedMS, RunMS, TotalMS float64 } `json:"timings"`
	Progress struct{ Step int }
}

func (fs *faultServer) status(id string) faultStatus {
	fs.t.Helper()
	code, b := fs.get("/v1/videos/" + id)
	var st faultStatus
	if err := json.Unmarshal(b, &st); code != 200 || err != nil {
		fs.t.Fatalf("status %s: %d %s", id, code, b)
	}
	return st
}

func (fs *faultServer) wait(id string, timeout time.Duration) faultStatus {
	fs.t.Helper()
	for deadline := time.Now().Add(timeout); ; time.Sleep(10 * time.Millisecond) {
		st := fs.status(id)
		if st.State == "succeeded" || st.State == "failed" || st.State == "cancelled" {
			return st
		}
		if time.Now().After(deadline) {
			fs.t.Fatalf("job %s still %s\n%s", id, st.State, fs.stderr.String())
		}
	}
}

func (fs *faultServer) metric(name string) float64 {
	fs.t.Helper()
	_, b := fs.get("/metrics")
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, name+" "); ok {
			var v float64
			fmt.Sscan(rest, &v)
			return v
		}
	}
	fs.t.Fatalf("no metric %s", name)
	return 0
}

// TestServeFaultConnectionFlood: eight clients (127.0.0.2-9) open 720 connections to a
// server whose descriptor limit is 512 (so at most 256 connections, 64 per client), half
// of them idle after a /healthz, half silent. The server caps them (the rest are refused
// at accept), and meanwhile another client's health checks and submissions (taking idle
// places of the flooders) and a worker restart all work, and no accepted job fails.
func TestServeFaultConnectionFlood(t *testing.T) {
	fs := startFault(t, filepath.Join(t.TempDir(), "data"), 512, "--nproc", "2", "--step-ms", "2")
	addr := strings.TrimPrefix(fs.url, "http://")
	const flood = 720
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < flood; i++ {
		src := net.IPv4(127, 0, 0, byte(2+i%8))
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: src}, Timeout: time.Second}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			continue // refused before it was established
		}
		conns = append(conns, c)
		if i%2 == 0 {
			io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n")
		}
	}
	time.Sleep(200 * time.Millisecond)
	refused := fs.metric("vdpp_http_connections_refused_total")
	open := fs.metric("vdpp_http_connections")
	if refused == 0 || open > 256 || open < 200 {
		t.Fatalf("flood of %d: %v refused, %v open; want refusals and at most 256 open", flood, refused, open)
	}
	// Health, readiness and jobs from another client, and a worker killed and restarted,
	// all during the flood.
	if code, b := fs.get("/healthz"); code != 200 {
		t.Fatalf("/healthz during the flood: %d %s", code, b)
	}
	before := readPids(t, fs.pids)
	if err := syscall.Kill(before[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := 0; i < 8; i++ {
		ids = append(ids, fs.mustSubmit(fmt.Sprintf(`{"num_frames":1,"steps":4,"height":8,"width":8,"seed":%d}`, i)))
	}
	for _, id := range ids {
		if st := fs.wait(id, 20*time.Second); st.State != "succeeded" {
			t.Fatalf("job during the flood: %+v", st)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		after := readPids(t, fs.pids)
		if len(after) == len(before) && !containsInt(after, before[0]) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker %d not replaced during the flood: pids %v\n%s", before[0], after, fs.stderr.String())
		}
	}
	waitReady(t, fs.url)
	if n := fs.metric("vdpp_jobs_failed_total"); n != 0 {
		t.Fatalf("%v jobs failed", n)
	}
	t.Logf("flood of %d connections: %v refused at accept, %v held; %v idle ones closed for newcomers", flood, refused, open,
		fs.metric("vdpp_http_connections_evicted_total"))
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// TestServeFaultDurableEnds: a job cancelled while running, one failed because its output
// could not be written (the data dir's jobs folder replaced by a file, which stops root
// too), and one succeeded keep those ends across a SIGKILL of the server and a restart,
// with their timings; storage trouble meanwhile answered /readyz and submissions with 503
// and a message that names no path.
func TestServeFaultDurableEnds(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	args := []string{"--nproc", "1", "--step-ms", "25"}
	fs := startFault(t, dir, 0, args...)
	done := fs.mustSubmit(`{"num_frames":1,"steps":2,"height":8,"width":8}`)
	doneSt := fs.wait(done, 10*time.Second)
	cancelled := fs.mustSubmit(`{"num_frames":1,"steps":50,"height":8,"width":8}`)
	for fs.status(cancelled).Progress.Step < 1 {
		time.Sleep(5 * time.Millisecond)
	}
	req, _ := http.NewRequest("DELETE", fs.url+"/v1/videos/"+cancelled, nil)
	if r, err := http.DefaultClient.Do(req); err != nil || r.StatusCode != http.StatusAccepted {
		t.Fatalf("cancel: %v %v", r, err)
	}
	failed := fs.mustSubmit(`{"num_frames":1,"steps":20,"height":8,"width":8}`)
	for fs.status(failed).State != "running" {
		time.Sleep(5 * time.Millisecond)
	}
	jobs := filepath.Join(dir, "jobs")
	if err := os.Rename(jobs, jobs+".away"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(jobs, []byte("not a folder"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, b := fs.submit(`{"num_frames":1,"steps":2,"height":8,"width":8}`, loadtest.TestImage(1))
	if code != http.StatusServiceUnavailable || strings.Contains(string(b), "/") || !strings.Contains(string(b), "storage_unavailable") {
		t.Fatalf("submit with the storage broken: %d %s", code, b)
	}
	if code, b := fs.get("/readyz"); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz with the storage broken: %d %s", code, b)
	}
	if st := fs.wait(failed, 20*time.Second); st.State != "failed" || strings.Contains(st.Error, "/") {
		t.Fatalf("job whose output could not be written: %+v", st)
	}
	if n := fs.metric("vdpp_jobs_failed_total"); n != 1 {
		t.Fatalf("vdpp_jobs_failed_total %v, want 1", n)
	}
	if st := fs.wait(cancelled, 10*time.Second); st.State != "cancelled" {
		t.Fatalf("cancelled job: %+v", st)
	}
	if !strings.Contains(fs.stderr.String(), dir) {
		t.Errorf("the server log does not name the failing path")
	}
	os.Remove(jobs)
	if err := os.Rename(jobs+".away", jobs); err != nil {
		t.Fatal(err)
	}
	fs.kill()

	fs = startFault(t, dir, 0, args...)
	for id, want := range map[string]string{done: "succeeded", cancelled: "cancelled", failed: "failed"} {
		if st := fs.status(id); st.State != want {
			t.Errorf("job after SIGKILL and restart: %s, want %s", st.State, want)
		}
	}
	if st := fs.status(done); st.Timings != doneSt.Timings {
		t.Errorf("timings %+v before the restart, %+v after", doneSt.Timings, st.Timings)
	}
	if code, b := fs.get("/readyz"); code != 200 {
		t.Fatalf("/readyz after the restart: %d %s", code, b)
	}
}

// bigPNG is a 16-bit RGBA PNG of size x size black pixels, written row by row (the test
// never holds the decoded image): about 130 KB for 4096x4096, 128 MB once decoded.
func bigPNG(t *testing.T, size int) []byte {
	t.Helper()
	var buf bytes.Buffer
	buf.WriteString("\x89PNG\r\n\x1a\n")
	chunk := func(typ string, data []byte) {
		binary.Write(&buf, binary.BigEndian, uint32(len(data)))
		crc := crc32.NewIEEE()
		io.WriteString(crc, typ)
		crc.Write(data)
		buf.WriteString(typ)
		buf.Write(data)
		binary.Write(&buf, binary.BigEndian, crc.Sum32())
	}
	ihdr := binary.BigEndian.AppendUint32(nil, uint32(size))
	ihdr = binary.BigEndian.AppendUint32(ihdr, uint32(size))
	chunk("IHDR", append(ihdr, 16, 6, 0, 0, 0)) // 16-bit, RGBA
	var z bytes.Buffer
	zw, _ := zlib.NewWriterLevel(&z, zlib.BestCompression)
	row := make([]byte, 1+size*8)
	for y := 0; y < size; y++ {
		zw.Write(row)
	}
	zw.Close()
	chunk("IDAT", z.Bytes())
	chunk("IEND", nil)
	return buf.Bytes()
}

// peakRSS is a process's peak resident memory (VmHWM) in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			var kb int64
			fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), &kb)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

var (
	plainOnce sync.Once
	plainBin  string
	plainErr  error
)

// plainBinary is vdpp built without the race detector: under it, image/png takes about
// 50 s to decode one 4096x4096 16-bit image (1.4 s without). In a -race run it is built
// once (sharing the package cache with the non-race benchmark step of CI).
func plainBinary(t *testing.T) string {
	t.Helper()
	if !raceEnabled {
		return vdppBin
	}
	plainOnce.Do(func() {
		plainBin = filepath.Join(filepath.Dir(vdppBin), "vdpp-norace")
		out, err := exec.Command("go", "build", "-o", plainBin, ".").CombinedOutput()
		if err != nil {
			plainErr = fmt.Errorf("building vdpp without -race: %v\n%s", err, out)
		}
	})
	if plainErr != nil {
		t.Fatal(plainErr)
	}
	return plainBin
}

// TestServeFaultBigImages: 8 concurrent uploads of a 16-bit 4096x4096 PNG (8 x 128 MB
// decoded) are all accepted and run, while the server's peak RSS stays bounded by its
// decode budget (without it, the decodes ran at once: 24 of them took 5.6 GB).
func TestServeFaultBigImages(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes 2 GB of pixels")
	}
	fs := startFaultBin(t, plainBinary(t), filepath.Join(t.TempDir(), "data"), 0, "--nproc", "1", "--step-ms", "1")
	img := bigPNG(t, 4096)
	uploads := 8 // VDPP_FAULT_UPLOADS=24 reproduces the 24
	if s := os.Getenv("VDPP_FAULT_UPLOADS"); s != "" {
		fmt.Sscan(s, &uploads)
	}
	ids := make([]string, uploads)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, b := fs.submit(fmt.Sprintf(`{"num_frames":1,"steps":1,"height":8,"width":8,"seed":%d}`, i), img)
			var st struct{ ID string }
			json.Unmarshal(b, &st)
			if code != http.StatusAccepted {
				t.Errorf("upload %d: %d %s", i, code, b)
			}
			ids[i] = st.ID
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if id != "" {
			if st := fs.wait(id, 120*time.Second); st.State != "succeeded" {
				t.Fatalf("big-image job: %+v", st)
			}
		}
	}
	peak := peakRSS(t, fs.cmd.Process.Pid)
	limit := int64(1) << 30
	t.Logf("%d uploads of a %d-byte PNG decoding to 128 MB: server peak RSS %d MB", uploads, len(img), peak>>20)
	if peak > limit {
		t.Fatalf("server peak RSS %d MB, want at most %d MB", peak>>20, limit>>20)
	}
}
