package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vdpp/vdpp/internal/wait"
)

// gomlxNoRace leaves GoMLX uninstrumented in -race builds, as the README's test command
// does. -l (no inlining there) keeps GoMLX from compiling its own uninstrumented copies of
// the standard library's generic code (sync.Map's), which the linker could otherwise hand
// to instrumented packages and so produce false reports.
const gomlxNoRace = "github.com/gomlx/gomlx/...=-race=false -l"

// built is one build of the real binary, made the first time a test asks for it.
type built struct {
	once sync.Once
	path string
	err  error
}

var (
	binDir   string // where the binaries go (removed by TestMain)
	binMu    sync.Mutex
	raceBin  built // as the test binary: with -race when the test runs with it
	plainBin built // without -race
)

// build makes b once: `go build` with args into binDir as name.
func (b *built) build(t testing.TB, name string, args ...string) string {
	t.Helper()
	b.once.Do(func() {
		binMu.Lock()
		if binDir == "" {
			binDir, b.err = os.MkdirTemp("", "vdpp-bin-")
		}
		dir := binDir
		binMu.Unlock()
		if b.err != nil {
			return
		}
		b.path = filepath.Join(dir, name)
		out, err := exec.Command("go", append(append([]string{"build", "-o", b.path}, args...), ".")...).CombinedOutput()
		if err != nil {
			b.err = fmt.Errorf("building %s: %v\n%s", name, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// vdpp is the real binary, built the first time a test asks for it, for the tests that
// run it end to end (multi-process runs, servers, the examples as a user types them).
// Under -short such a test is skipped, and no binary is built: the full tier (CI, without
// -short) runs them all.
func vdpp(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the vdpp binary end to end (the full tier, without -short, runs it)")
	}
	return vdppBuilt(t)
}

// vdppBuilt is vdpp's binary in both tiers. In a -race run it is built with the race
// detector, as the README's test command builds the tests: the end-to-end tests of
// processes, servers and their faults run vdpp's concurrent code under the detector;
// GoMLX's numeric kernels stay uninstrumented (they are 30x slower instrumented).
func vdppBuilt(t testing.TB) string {
	t.Helper()
	if !raceEnabled {
		return vdppPlain(t)
	}
	return raceBin.build(t, "vdpp", "-race", "-gcflags="+gomlxNoRace)
}

// vdppPlain is vdpp built without the race detector, in both tiers, for the tests that
// check what a command produces rather than how its goroutines meet: the documents'
// examples and the demo's table. Under the detector the standard library's image and
// compression code runs 5 to 40 times slower (one built-in Wan generation: 27 s instead of
// 3.6 s; image/png: 50 s to decode one 4096x4096 16-bit image instead of 1.4 s), and the
// concurrent paths those commands take are run under it by the other end-to-end tests.
func vdppPlain(t testing.TB) string {
	t.Helper()
	return plainBin.build(t, "vdpp-norace")
}

// Which tests run in parallel: a test that starts processes (the vdpp binary, node, a
// browser, network namespaces' hosts) and waits on them calls t.Parallel() (its subtests too,
// where they are independent), so that on a two-core machine one test's processes compute
// while another's start, load a model or wait for a heartbeat; `go test` runs at most
// -parallel of them at once (GOMAXPROCS by default). Each such test keeps its own files
// (t.TempDir), ports (port 0, or a rendezvous port inside namespaces of its own) and
// processes (found as children of the process it started, never by name). These stay
// serial, and so never share the machine with a parallel test (go test runs a package's
// serial tests first, then its parallel ones): a test that measures a process's peak memory
// against another's (TestMultiNodeA14B), tests that run a command in the test process
// itself (run, runPlan, runParity, ...: the command's process-wide state, such as its
// signal handling, is one per process), and tests that set the environment (t.Setenv).
func TestMain(m *testing.M) {
	if file := os.Getenv(peakRSSEnv); file != "" {
		os.Exit(runPeakRSS(file, os.Args[1:]))
	}
	// A race-built vdpp sleeps a second before it exits (GORACE's atexit_sleep_ms, 1000 by
	// default, time for a report other goroutines are still printing); the end-to-end
	// tests start a few hundred of them, one after another. A report already printed still
	// fails the process (exit status 66). A GORACE the caller set is kept.
	if _, ok := os.LookupEnv("GORACE"); !ok {
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	code := m.Run()
	announceSkips()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

type benchJSON struct {
	NProc           int      `json:"nproc"`
	StageSteps      [][2]int `json:"stage_steps"`
	EqualToBaseline *bool    `json:"equal_to_baseline"`
	SteadySampleMS  float64  `json:"steady_sample_ms"`
	FirstSampleMS   float64  `json:"first_sample_ms"`
	Speedup         float64  `json:"speedup"`
	Efficiency      float64  `json:"efficiency"`
	PerRank         []struct {
		Rank         int     `json:"rank"`
		BusyFraction float64 `json:"busy_fraction"`
	} `json:"per_rank"`
}

func benchRun(t *testing.T, args ...string) (benchJSON, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "bench.json")
	cmd := exec.Command(vdpp(t), append([]string{"bench", "--model", "synthetic", "--json", out}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("vdpp bench %v: %v\nstderr:\n%s", args, err, stderr.String())
	}
	var rep benchJSON
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	return rep, stdout.String()
}

func TestBenchPipelineEqualsBaseline(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		args   []string
		stages [][2]int
	}{
		{"synthetic uneven", []string{"--nproc", "3", "--steps", "7", "--num-samples", "6", "--warmup-samples", "1", "--step-ms", "0.2"},
			[][2]int{{0, 3}, {3, 5}, {5, 7}}},
		{"synthetic guided micro-batch", []string{"--nproc", "2", "--steps", "4", "--num-samples", "5", "--warmup-samples", "1",
			"--micro-batch", "2", "--max-guidance", "3", "--step-ms", "0"}, [][2]int{{0, 2}, {2, 4}}},
		{"mesh pp2 x cfg2", []string{"--pp", "2", "--cfg", "2", "--steps", "4", "--num-samples", "4", "--warmup-samples", "1", "--step-ms", "0"},
			[][2]int{{0, 2}, {0, 2}, {2, 4}, {2, 4}}},
		{"mesh cp2 x dp2, 3 frames", []string{"--cp", "2", "--dp", "2", "--max-guidance", "3", "--num-frames", "3", "--steps", "3",
			"--num-samples", "5", "--warmup-samples", "1", "--step-ms", "0"}, [][2]int{{0, 3}, {0, 3}, {0, 3}, {0, 3}}},
		{"dummy", []string{"--model", "dummy", "--nproc", "2", "--steps", "4", "--num-samples", "3", "--warmup-samples", "1",
			"--hidden-channels", "8", "--num-frames", "2", "--height", "64", "--width", "64"}, [][2]int{{0, 2}, {2, 4}}},
		{"builtin decode spread over 2", []string{"--model", "builtin", "--nproc", "2", "--steps", "2", "--num-samples", "3", "--warmup-samples", "1",
			"--num-frames", "2", "--height", "64", "--width", "64", "--decode-ranks", "2", "--decode-chunk-size", "1"},
			[][2]int{{0, 1}, {1, 2}}},
		// --decode-steps: the decode costs 10 steps, so the last stage (which decodes) keeps
		// one step; the latents are those of the baseline whatever the cut.
		{"builtin decode-aware cut", []string{"--model", "builtin", "--nproc", "2", "--steps", "4", "--num-samples", "3", "--warmup-samples", "1",
			"--num-frames", "2", "--height", "64", "--width", "64", "--decode-ranks", "1", "--decode-steps", "10"},
			[][2]int{{0, 3}, {3, 4}}},
		{"decode steps without a decode: even cut", []string{"--nproc", "2", "--steps", "4", "--num-samples", "3", "--warmup-samples", "1",
			"--step-ms", "0", "--decode-steps", "10"}, [][2]int{{0, 2}, {2, 4}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rep, md := benchRun(t, tc.args...)
			if rep.EqualToBaseline == nil || !*rep.EqualToBaseline {
				t.Fatalf("pipeline latents differ from the one-rank baseline: %+v", rep)
			}
			if !reflect.DeepEqual(rep.StageSteps, tc.stages) {
				t.Fatalf("stage_steps %v, want %v", rep.StageSteps, tc.stages)
			}
			if len(rep.PerRank) != len(tc.stages) || rep.SteadySampleMS <= 0 || rep.FirstSampleMS <= 0 {
				t.Fatalf("incomplete report: %+v", rep)
			}
			if !strings.Contains(md, "|") {
				t.Fatalf("no Markdown table on stdout:\n%s", md)
			}
		})
	}
}

func TestBenchRejectsBadFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--nproc", "5", "--steps", "4"},
		{"--num-samples", "0"},
		{"--model", "nosuchmodel", "--nproc", "1", "--steps", "1", "--num-samples", "2", "--warmup-samples", "0"},
		{"--bogus-flag"},
		{"--nproc", "2", "--steps", "2", "--decode-ranks", "3"},
		{"--cfg", "2", "--steps", "2", "--decode-ranks", "1"},
		{"--nproc", "2", "--steps", "2", "--decode-ranks", "1", "--decode-steps", "-1"},
	} {
		cmd := exec.Command(vdpp(t), append([]string{"bench", "--model", "synthetic"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Errorf("vdpp bench %v succeeded", args)
			continue
		}
		if strings.Contains(string(out), "panic") {
			t.Errorf("vdpp bench %v panicked:\n%s", args, out)
		}
	}
}

// A worker killed with SIGKILL mid-run: the run fails within the timeout, names the rank,
// and leaves no process behind.
func TestBenchWorkerKilled(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(vdpp(t), "bench", "--model", "synthetic", "--nproc", "3", "--steps", "6", "--num-samples", "400",
		"--warmup-samples", "1", "--step-ms", "5", "--timeout", "10s", "--no-baseline")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var victim int
	wait.For(20*time.Second, func() bool {
		for _, pid := range childPIDs(cmd.Process.Pid) {
			if strings.Contains(cmdline(pid), "worker") && envOf(pid, "RANK") == "1" {
				victim = pid
			}
		}
		return victim != 0
	})
	if victim == 0 {
		cmd.Process.Kill()
		t.Fatalf("no rank-1 worker found; stderr:\n%s", stderr.String())
	}
	// Kill it mid-run: once it has computed (used CPU time) for a while.
	if !wait.For(20*time.Second, func() bool { return cpuTicks(victim) >= 5 }) {
		cmd.Process.Kill()
		t.Fatalf("the rank-1 worker never started computing; stderr:\n%s", stderr.String())
	}
	all := append(childPIDs(cmd.Process.Pid), cmd.Process.Pid)
	start := time.Now()
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatalf("bench succeeded after a worker was killed")
		}
	case <-time.After(15 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("bench still running 15 s after a worker was killed; stderr:\n%s", stderr.String())
	}
	t.Logf("exited %v after the kill", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(stderr.String(), "rank 1") {
		t.Fatalf("error does not name rank 1:\n%s", stderr.String())
	}
	wait.For(5*time.Second, func() bool { return !anyAlive(all) })
	for _, pid := range all {
		if alive(pid) {
			t.Errorf("process %d (%s) still alive", pid, cmdline(pid))
		}
	}
}

func anyAlive(pids []int) bool {
	for _, pid := range pids {
		if alive(pid) {
			return true
		}
	}
	return false
}

// cpuTicks is the user plus system CPU time pid has used, in clock ticks (0 if it is gone).
func cpuTicks(pid int) int {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:]) // state is field 3; utime and stime are fields 14 and 15
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.Atoi(f[11])
	k, _ := strconv.Atoi(f[12])
	return u + k
}

func childPIDs(parent int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// stat: pid (comm) state ppid ...
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 1 {
			if pp, _ := strconv.Atoi(f[1]); pp == parent {
				out = append(out, pid)
			}
		}
	}
	return out
}

func cmdline(pid int) string {
	b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	return strings.ReplaceAll(string(b), "\x00", " ")
}

func envOf(pid int, key string) string {
	b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
	for _, kv := range strings.Split(string(b), "\x00") {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v
		}
	}
	return ""
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && !strings.HasPrefix(strings.TrimSpace(s[i+1:]), "Z")
}
