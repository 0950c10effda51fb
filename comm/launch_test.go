package comm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vdpp/vdpp/internal/wait"
)

// fakeProc is a child run by a goroutine; SIGKILL always ends it.
type fakeProc struct {
	pid    int
	sigs   chan os.Signal
	got    chan os.Signal // every signal received, for assertions
	killed chan struct{}
	once   sync.Once
	done   chan error
}

func (f *fakeProc) Pid() int { return f.pid }

func (f *fakeProc) Signal(s os.Signal) error {
	f.got <- s
	if s == syscall.SIGKILL {
		f.once.Do(func() { close(f.killed) })
		return nil
	}
	select {
	case f.sigs <- s:
	default:
	}
	return nil
}

func (f *fakeProc) Wait() error {
	select {
	case err := <-f.done:
		return err
	case <-f.killed:
		return errors.New("signal: killed")
	}
}

// script is what a fake child does; it returns the child's Wait error.
type script func(spec ProcSpec, sigs <-chan os.Signal) error

// fakeStarter starts fake children running scripts[rank] and records them.
type fakeStarter struct {
	mu      sync.Mutex
	procs   map[int]*fakeProc
	specs   map[int]ProcSpec
	scripts map[int]script
	failAt  int // rank whose start fails (-1 none)
}

func newFakeStarter(scripts map[int]script) *fakeStarter {
	return &fakeStarter{procs: map[int]*fakeProc{}, specs: map[int]ProcSpec{}, scripts: scripts, failAt: -1}
}

func (s *fakeStarter) start(spec ProcSpec) (Process, error) {
	if spec.Rank == s.failAt {
		return nil, errors.New("no such file")
	}
	p := &fakeProc{pid: 1000 + spec.Rank, sigs: make(chan os.Signal, 8), got: make(chan os.Signal, 8), killed: make(chan struct{}), done: make(chan error, 1)}
	s.mu.Lock()
	s.procs[spec.Rank], s.specs[spec.Rank] = p, spec
	sc := s.scripts[spec.Rank]
	s.mu.Unlock()
	go func() {
		if sc == nil {
			p.done <- nil
			return
		}
		p.done <- sc(spec, p.sigs)
	}()
	return p, nil
}

func (s *fakeStarter) signals(rank int) []os.Signal {
	s.mu.Lock()
	p := s.procs[rank]
	s.mu.Unlock()
	var out []os.Signal
	for {
		select {
		case sig := <-p.got:
			out = append(out, sig)
		default:
			return out
		}
	}
}

// untilSignal exits with "signal: <name>" when a signal arrives.
func untilSignal(_ ProcSpec, sigs <-chan os.Signal) error {
	s := <-sigs
	return errors.New("signal: " + s.String())
}

func exitWith(msg string) script {
	return func(ProcSpec, <-chan os.Signal) error { return errors.New(msg) }
}

func TestLaunchFake(t *testing.T) {
	stubborn := func(_ ProcSpec, sigs <-chan os.Signal) error {
		for range sigs { // ignores SIGTERM; only SIGKILL ends it
		}
		return nil
	}
	tests := []struct {
		name        string
		opts        LaunchOptions
		scripts     map[int]script
		failStartAt int
		wantErr     string // "" = success
		wantSigs    map[int][]os.Signal
		maxTime     time.Duration
	}{
		{name: "all succeed", opts: LaunchOptions{NProcPerNode: 3}, wantSigs: map[int][]os.Signal{0: nil, 1: nil, 2: nil}},
		{name: "first failure named, others terminated",
			opts:     LaunchOptions{NProcPerNode: 3},
			scripts:  map[int]script{0: untilSignal, 1: exitWith("exit status 1"), 2: untilSignal},
			wantErr:  "rank 1 exited: exit status 1",
			wantSigs: map[int][]os.Signal{0: {syscall.SIGTERM}, 2: {syscall.SIGTERM}}},
		{name: "stubborn child killed after grace",
			opts:     LaunchOptions{NProcPerNode: 2, GracePeriod: 50 * time.Millisecond},
			scripts:  map[int]script{0: exitWith("signal: killed"), 1: stubborn},
			wantErr:  "rank 0 exited: signal: killed",
			wantSigs: map[int][]os.Signal{1: {syscall.SIGTERM, syscall.SIGKILL}},
			maxTime:  time.Second},
		{name: "second node ranks",
			opts:    LaunchOptions{NProcPerNode: 2, NNodes: 2, NodeRank: 1, MasterPort: 5000},
			scripts: map[int]script{2: nil, 3: exitWith("exit status 2")},
			wantErr: "rank 3 exited: exit status 2"},
		{name: "start failure stops the started", opts: LaunchOptions{NProcPerNode: 3},
			scripts: map[int]script{0: untilSignal}, failStartAt: 1, wantErr: "rank 1: no such file",
			wantSigs: map[int][]os.Signal{0: {syscall.SIGKILL}}},
		{name: "node rank out of range", opts: LaunchOptions{NNodes: 2, NodeRank: 2, MasterPort: 1}, wantErr: "node rank 2"},
		{name: "port needed for several nodes", opts: LaunchOptions{NNodes: 2}, wantErr: "master-port is required"},
		{name: "bad nproc", opts: LaunchOptions{NProcPerNode: -1}, wantErr: "nproc-per-node"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := newFakeStarter(tc.scripts)
			if tc.failStartAt > 0 {
				fs.failAt = tc.failStartAt
			}
			o := tc.opts
			o.Start, o.Executable, o.Signals = fs.start, "/bin/worker", make(chan os.Signal)
			o.Stdout, o.Stderr = &bytes.Buffer{}, &bytes.Buffer{}
			start := time.Now()
			err := Launch(context.Background(), o)
			if tc.maxTime > 0 && time.Since(start) > tc.maxTime {
				t.Fatalf("took %v", time.Since(start))
			}
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			for rank, want := range tc.wantSigs {
				if got := fs.signals(rank); len(got) != len(want) || (len(want) > 0 && got[0] != want[0]) || (len(want) > 1 && got[len(got)-1] != want[1]) {
					t.Fatalf("rank %d got signals %v, want %v", rank, got, want)
				}
			}
		})
	}
}

func TestLaunchChildEnvironment(t *testing.T) {
	fs := newFakeStarter(nil)
	o := LaunchOptions{NProcPerNode: 2, NNodes: 3, NodeRank: 2, MasterAddr: "10.1.2.3", MasterPort: 4000,
		Executable: "/bin/w", Command: []string{"worker", "--x"}, Env: []string{"A=1"},
		Start: fs.start, Signals: make(chan os.Signal), Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}}
	if err := Launch(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	for local := range 2 {
		rank := 4 + local
		spec := fs.specs[rank]
		vars := map[string]string{}
		for _, kv := range spec.Env {
			k, v, _ := strings.Cut(kv, "=")
			vars[k] = v
		}
		env, err := EnvFromOS(func(k string) string { return vars[k] })
		want := Env{Rank: rank, WorldSize: 6, LocalRank: local, LocalWorldSize: 2, MasterAddr: "10.1.2.3", MasterPort: 4000}
		if err != nil || env != want || vars["A"] != "1" || spec.Path != "/bin/w" || strings.Join(spec.Args, " ") != "worker --x" {
			t.Fatalf("rank %d: env %+v (%v), spec %+v", rank, env, err, spec)
		}
	}
}

func TestLaunchForwardsSignals(t *testing.T) {
	fs := newFakeStarter(map[int]script{
		0: func(_ ProcSpec, s <-chan os.Signal) error { <-s; return nil },
		1: func(_ ProcSpec, s <-chan os.Signal) error { <-s; return nil },
	})
	sigs := make(chan os.Signal, 1)
	o := LaunchOptions{NProcPerNode: 2, Start: fs.start, Executable: "/bin/w", Signals: sigs, Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}}
	sigs <- syscall.SIGINT
	if err := Launch(context.Background(), o); err != nil { // both end cleanly on it
		t.Fatal(err)
	}
	for r := range 2 {
		if got := fs.signals(r); len(got) != 1 || got[0] != syscall.SIGINT {
			t.Fatalf("rank %d got %v", r, got)
		}
	}
}

func TestLaunchContextCancel(t *testing.T) {
	fs := newFakeStarter(map[int]script{0: untilSignal, 1: untilSignal})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	o := LaunchOptions{NProcPerNode: 2, Start: fs.start, Executable: "/bin/w", Signals: make(chan os.Signal), Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}}
	if err := Launch(ctx, o); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
}

func TestLinePrefixer(t *testing.T) {
	var out bytes.Buffer
	var mu sync.Mutex
	a := newLinePrefixer(&mu, &out, "[rank 0] ")
	b := newLinePrefixer(&mu, &out, "[rank 1] ")
	for _, w := range []struct {
		p *linePrefixer
		s string
	}{{a, "hel"}, {b, "one\ntw"}, {a, "lo\nwor"}, {b, "o\n"}, {a, "ld"}} {
		w.p.Write([]byte(w.s))
	}
	a.Flush()
	b.Flush()
	want := "[rank 1] one\n[rank 0] hello\n[rank 1] two\n[rank 0] world\n"
	if out.String() != want {
		t.Fatalf("got %q, want %q", out.String(), want)
	}
}

// lineWatcher collects output and reports when n lines containing marker arrived.
type lineWatcher struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	marker string
	n      int32
	seen   atomic.Int32
	ready  chan struct{}
}

func (w *lineWatcher) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if bytes.Contains(p, []byte(w.marker)) && w.seen.Add(1) == w.n {
		close(w.ready)
	}
	return len(p), nil
}

func (w *lineWatcher) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func workerLaunch(mode string, n int, out *lineWatcher, start StartFunc) LaunchOptions {
	return LaunchOptions{
		NProcPerNode: n, GracePeriod: 2 * time.Second,
		Command: []string{"-test.run=^$"},
		// GORACE: race-enabled workers would otherwise sleep 1 s at exit.
		Env:    append(os.Environ(), workerModeVar+"="+mode, "GORACE=atexit_sleep_ms=0"),
		Stdout: out, Stderr: out, Start: start,
	}
}

func TestLaunchRealRing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	out := &lineWatcher{marker: "ring ok", n: 3, ready: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := Launch(ctx, workerLaunch("ring", 3, out, nil)); err != nil {
		t.Fatalf("%v\noutput:\n%s", err, out)
	}
	for _, want := range []string{"[rank 0] ring ok pid=", "[rank 1] ring ok pid=", "[rank 2] ring ok pid=", " local=2/3\n"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestLaunchOwnSessions: children share the launcher's session unless OwnSessions puts
// each in a session of its own (it leads it).
func TestLaunchOwnSessions(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	mine, err := unix.Getsid(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, own := range []bool{false, true} {
		out := &lineWatcher{marker: "session", n: 2, ready: make(chan struct{})}
		o := workerLaunch("session", 2, out, nil)
		o.OwnSessions = own
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		err := Launch(ctx, o)
		cancel()
		if err != nil {
			t.Fatalf("%v\noutput:\n%s", err, out)
		}
		lines := 0
		for _, ln := range strings.Split(out.String(), "\n") {
			var rank, sid, pid int
			if n, _ := fmt.Sscanf(ln, "[rank %d] session %d pid %d", &rank, &sid, &pid); n != 3 {
				continue
			}
			lines++
			if own && sid != pid || !own && sid != mine {
				t.Errorf("own sessions %v: rank %d (pid %d) is in session %d; the launcher's is %d", own, rank, pid, sid, mine)
			}
		}
		if lines != 2 {
			t.Fatalf("own sessions %v: %d session lines:\n%s", own, lines, out)
		}
	}
}

func TestLaunchRealKillOneWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	var mu sync.Mutex
	pids := map[int]int{}
	start := func(spec ProcSpec) (Process, error) {
		p, err := StartProcess(spec)
		if err == nil {
			mu.Lock()
			pids[spec.Rank] = p.Pid()
			mu.Unlock()
		}
		return p, err
	}
	out := &lineWatcher{marker: "ready", n: 3, ready: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res := make(chan error, 1)
	go func() { res <- Launch(ctx, workerLaunch("hang", 3, out, start)) }()
	select {
	case <-out.ready:
	case err := <-res:
		t.Fatalf("launch ended early: %v\n%s", err, out)
	case <-time.After(45 * time.Second):
		t.Fatalf("workers not ready:\n%s", out)
	}
	mu.Lock()
	victim := pids[1]
	mu.Unlock()
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	select {
	case err := <-res:
		if err == nil || err.Error() != "rank 1 exited: signal: killed" {
			t.Fatalf("err = %v\n%s", err, out)
		}
		if d := time.Since(killed); d > 10*time.Second {
			t.Fatalf("launch returned %v after the kill", d)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("launch still running 20s after a worker was killed\n%s", out)
	}
	mu.Lock()
	defer mu.Unlock()
	for rank, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("rank %d (pid %d) still exists: kill(0) = %v", rank, pid, err)
		}
	}
}

// After SIGINT the children's output while they stop is held: the ranks that stop as asked
// (interrupted status, or a stopping signal) print nothing more, and Launch ends with one
// ErrInterrupted line naming them; a rank that fails otherwise keeps its lines and is
// named; children that all finish cleanly on the signal (a server) end it without error.
func TestLaunchInterruptSummary(t *testing.T) {
	noisy := func(status string) script {
		return func(spec ProcSpec, s <-chan os.Signal) error {
			fmt.Fprintf(spec.Stderr, "working\n")
			<-s
			fmt.Fprintf(spec.Stderr, "vdpp bench: interrupted\ncomm: peer link failed\n")
			if status == "" {
				return nil
			}
			return errors.New(status)
		}
	}
	for _, c := range []struct {
		name     string
		scripts  map[int]script
		wantErr  string // "" = nil
		wantOut  []string
		notInOut []string
	}{
		{"all stop", map[int]script{0: noisy("exit status 130"), 1: noisy("signal: interrupt")},
			"interrupted: stopped ranks 0-1", []string{"[rank 0] working", "[rank 1] working"}, []string{"peer link failed", "vdpp bench: interrupted"}},
		{"one fails otherwise", map[int]script{0: noisy("exit status 130"), 1: noisy("exit status 1")},
			"interrupted; rank 1 exited: exit status 1", []string{"[rank 1] comm: peer link failed"}, []string{"[rank 0] comm: peer link failed"}},
		{"clean stop", map[int]script{0: noisy(""), 1: noisy("")}, "", nil, []string{"peer link failed"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := newFakeStarter(c.scripts)
			sigs := make(chan os.Signal, 1)
			var stderr syncBuf
			o := LaunchOptions{NProcPerNode: 2, Start: fs.start, Executable: "/bin/w", Signals: sigs, Stdout: &bytes.Buffer{}, Stderr: &stderr}
			// The signal goes out once both children have said they work.
			go func() {
				if wait.For(time.Minute, func() bool {
					return strings.Contains(stderr.String(), "[rank 0] working") && strings.Contains(stderr.String(), "[rank 1] working")
				}) {
					sigs <- syscall.SIGINT
				}
			}()
			err := Launch(context.Background(), o)
			switch {
			case c.wantErr == "" && err != nil:
				t.Fatalf("err %v, want nil", err)
			case c.wantErr != "" && (!errors.Is(err, ErrInterrupted) || err.Error() != c.wantErr):
				t.Fatalf("err %v, want ErrInterrupted %q", err, c.wantErr)
			}
			for _, w := range c.wantOut {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
				}
			}
			for _, w := range c.notInOut {
				if strings.Contains(stderr.String(), w) {
					t.Errorf("stderr has %q:\n%s", w, stderr.String())
				}
			}
		})
	}
}

// syncBuf is a bytes.Buffer safe for a writer and a reader at once.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
