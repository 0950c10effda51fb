package main

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vdpp/vdpp/internal/wait"
	"github.com/vdpp/vdpp/serve/loadtest"
)

// The fault suite: the real `vdpp serve` binary on loopback (port 0), each test a few
// seconds, bounded in connections, jobs and time.

// TestServeFaultConnectionFlood: eight clients (127.0.0.2-9) open 720 connections to a
// server whose descriptor limit is 512 (so at most 256 connections, 64 per client), half
// of them idle after a /healthz, half silent. The server caps them (the rest are refused
// at accept), and meanwhile another client's health checks and submissions (taking idle
// places of the flooders) and a worker restart all work, and no accepted job fails.
func TestServeFaultConnectionFlood(t *testing.T) {
	t.Parallel()
	fs := startServe(t, serveOptions{nofile: 512}, "--model", "synthetic", "--nproc", "2", "--step-ms", "2")
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
	// The server takes the connections in turn: it holds up to its cap and refuses the
	// rest (some handshakes the kernel completed may never reach it). Wait until it holds
	// most of its cap and has refused some.
	var refused, open float64
	if !wait.For(10*time.Second, func() bool {
		refused, open = fs.metric("vdpp_http_connections_refused_total"), fs.metric("vdpp_http_connections")
		return refused > 0 && open >= 200 || open > 256
	}) {
		t.Fatalf("after 10 s the server holds %v connections and refused %v", open, refused)
	}
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
		ids = append(ids, fs.mustSubmit(fmt.Sprintf(`{"num_frames":1,"steps":4,"height":8,"width":8,"seed":%d}`, i), loadtest.TestImage(3)))
	}
	for _, id := range ids {
		if st := fs.wait(id, 20*time.Second); st.State != "succeeded" {
			t.Fatalf("job during the flood: %+v", st)
		}
	}
	var after []int
	if !wait.For(10*time.Second, func() bool {
		after = readPids(t, fs.pids)
		return len(after) == len(before) && !containsInt(after, before[0])
	}) {
		t.Fatalf("worker %d not replaced during the flood: pids %v\n%s", before[0], after, fs.stderr.String())
	}
	fs.waitReady()
	if n := fs.metric("vdpp_jobs_failed_total"); n != 0 {
		t.Fatalf("%v jobs failed", n)
	}
	if n := fs.metric("vdpp_http_connections"); n > 256 {
		t.Fatalf("%v connections held at the end of the flood, over the cap of 256", n)
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
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	args := []string{"--nproc", "1", "--step-ms", "25"}
	fs := startServe(t, serveOptions{dir: dir}, append([]string{"--model", "synthetic"}, args...)...)
	done := fs.mustSubmit(`{"num_frames":1,"steps":2,"height":8,"width":8}`, loadtest.TestImage(3))
	doneSt := fs.wait(done, 10*time.Second)
	cancelled := fs.mustSubmit(`{"num_frames":1,"steps":50,"height":8,"width":8}`, loadtest.TestImage(3))
	fs.waitStep(cancelled, 1, 10*time.Second)
	req, _ := http.NewRequest("DELETE", fs.url+"/v1/videos/"+cancelled, nil)
	if r, err := http.DefaultClient.Do(req); err != nil || r.StatusCode != http.StatusAccepted {
		t.Fatalf("cancel: %v %v", r, err)
	}
	failed := fs.mustSubmit(`{"num_frames":1,"steps":20,"height":8,"width":8}`, loadtest.TestImage(3))
	if !wait.For(10*time.Second, func() bool { return fs.status(failed).State == "running" }) {
		t.Fatal("job never started")
	}
	jobs := filepath.Join(dir, "jobs")
	if err := os.Rename(jobs, jobs+".away"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(jobs, []byte("not a folder"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, b := fs.submit(map[string][]byte{"params": []byte(`{"num_frames":1,"steps":2,"height":8,"width":8}`), "image": loadtest.TestImage(1)})
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

	fs = startServe(t, serveOptions{dir: dir}, append([]string{"--model", "synthetic"}, args...)...)
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

// TestServeFaultBigImages: 8 concurrent uploads of a 16-bit 4096x4096 PNG (8 x 128 MB
// decoded) are all accepted and run, while the server's peak RSS stays bounded by its
// decode budget (without it, the decodes ran at once: 24 of them took 5.6 GB).
func TestServeFaultBigImages(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("decodes 2 GB of pixels")
	}
	fs := startServe(t, serveOptions{bin: vdppPlain(t)}, "--model", "synthetic", "--nproc", "1", "--step-ms", "1",
		"--max-image-pixels", "16777216")
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
			code, b := fs.submit(map[string][]byte{"params": []byte(fmt.Sprintf(`{"num_frames":1,"steps":1,"height":8,"width":8,"seed":%d}`, i)), "image": img})
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
