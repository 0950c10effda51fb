package comm

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vdpp/vdpp/internal/wait"
)

// worldWithChild starts a TCP world of n ranks: ranks 0..n-2 in this process, rank n-1 a
// child process (the test binary in "idle" mode), returned once it joined.
func worldWithChild(t *testing.T, n int, opts Options) ([]*TCPTransport, *exec.Cmd) {
	t.Helper()
	opts.Logger = quietLogger()
	opts.ConnectTimeout = 20 * time.Second
	port := freePort(t)
	child := exec.Command(os.Args[0])
	child.Env = append(os.Environ(), workerModeVar+"=idle",
		"RANK="+strconv.Itoa(n-1), "WORLD_SIZE="+strconv.Itoa(n), "MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(port))
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		child.Process.Kill()
		child.Wait()
	})
	ts := dialRanks(t, n, n-1, port, opts)
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "joined\n" {
		t.Fatalf("child said %q", line)
	}
	return ts, child
}

// pendingRecvs starts a Recv on every in-process rank r from rank (r+1) % (len(ts)),
// neither of which will ever be sent, and returns their errors as they end.
func pendingRecvs(ts []*TCPTransport) <-chan error {
	errs := make(chan error, len(ts))
	for r, tr := range ts {
		go func() {
			_, err := tr.Recv(context.Background(), (r+1)%len(ts))
			errs <- err
		}()
	}
	return errs
}

// expectEnd waits for n errors that all match target and name what; each must come
// within limit of start.
func expectEnd(t *testing.T, errs <-chan error, n int, start time.Time, limit time.Duration, target error, what string) {
	t.Helper()
	for range n {
		select {
		case err := <-errs:
			if !errors.Is(err, target) || !strings.Contains(err.Error(), what) {
				t.Fatalf("err = %v, want %v naming %q", err, target, what)
			}
			if d := time.Since(start); d > limit {
				t.Fatalf("noticed after %v (limit %v): %v", d, limit, err)
			}
		case <-time.After(limit + 5*time.Second):
			t.Fatalf("still waiting %v after the fault", limit+5*time.Second)
		}
	}
}

func TestTCPSilentPeerIsLost(t *testing.T) {
	// A stopped process keeps its sockets open (the kernel even acknowledges data) but says
	// nothing: a partition that no reset reveals. Ranks that never talk to it notice too.
	const timeout = time.Second
	ts, child := worldWithChild(t, 3, Options{RecvTimeout: time.Hour, HeartbeatTimeout: timeout})
	errs := pendingRecvs(ts)
	start := time.Now()
	if err := child.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	expectEnd(t, errs, 2, start, timeout+2*time.Second, ErrPeerLost, "lost rank 2 (node ")
}

func TestTCPKilledPeerIsLostAtOnce(t *testing.T) {
	ts, child := worldWithChild(t, 3, Options{RecvTimeout: time.Hour, HeartbeatTimeout: time.Minute})
	errs := pendingRecvs(ts)
	start := time.Now()
	child.Process.Kill()
	expectEnd(t, errs, 2, start, 2*time.Second, ErrPeerLost, "lost rank 2")
}

func TestTCPAbortEndsEveryRank(t *testing.T) {
	ts := dialWorld(t, 3, Options{RecvTimeout: time.Hour})
	errs := make(chan error, 2)
	for _, r := range []int{0, 2} {
		go func() {
			_, err := ts[r].Recv(context.Background(), 2-r) // 0 waits on 2, 2 on 0
			errs <- err
		}()
	}
	start := time.Now()
	ts[1].Abort(errors.New("bad input"))
	expectEnd(t, errs, 2, start, 2*time.Second, ErrPeerFailed, "rank 1 (node ")
	// Later operations fail the same way, naming the same rank.
	if err := ts[0].Send(context.Background(), 2, Message{}); !errors.Is(err, ErrPeerFailed) || !strings.Contains(err.Error(), "rank 1") {
		t.Fatalf("send after the abort: %v", err)
	}
}

func TestTCPGoodbyeIsNotALoss(t *testing.T) {
	// Heartbeats race the goodbye: a rank that closes on purpose must never end the others'
	// world. The timeout is long enough that a loaded machine running the race detector does
	// not starve a live peer's heartbeats past it (50 ms did, at load average 28).
	for i := range 10 {
		ts := dialWorld(t, 3, Options{RecvTimeout: time.Hour, HeartbeatTimeout: time.Second})
		got := make(chan error, 1)
		go func() {
			_, err := ts[0].Recv(context.Background(), 1)
			got <- err
		}()
		ts[2].Close()
		// Rank 0 still hears rank 1, and notices rank 2 only when it talks to it.
		if _, err := ts[0].Recv(context.Background(), 2); !errors.Is(err, ErrPeerGone) || errors.Is(err, ErrPeerLost) {
			t.Fatalf("round %d: recv from the closed rank: %v", i, err)
		}
		if err := ts[1].Send(context.Background(), 0, Message{Sample: 7}); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		if err := <-got; err != nil {
			t.Fatalf("round %d: rank 0 lost its world when rank 2 closed: %v", i, err)
		}
		for _, tr := range ts {
			tr.Close()
		}
	}
}

func TestTCPProgressExtendsRecvTimeout(t *testing.T) {
	// Rank 1 reports 100 ms units of work, each once rank 0 has heard the last, until rank
	// 0's receive has outlasted its 500 ms timeout on their strength; then it hands off.
	// The receive timeout is a bound on silence, not on the work.
	ts := dialWorld(t, 2, Options{RecvTimeout: 500 * time.Millisecond, HeartbeatTimeout: time.Second})
	go func() {
		for unit := int64(1); ts[0].extended.Load() == 0; unit++ {
			ts[1].Progress(100 * time.Millisecond)
			if !wait.For(10*time.Second, func() bool { return ts[0].peers[1].progress.Load() >= unit }) {
				break // rank 0 never heard it: its receive times out and the test says so
			}
		}
		ts[1].Send(context.Background(), 0, Message{Sample: 1})
	}()
	if m, err := ts[0].Recv(context.Background(), 1); err != nil || m.Sample != 1 {
		t.Fatalf("recv from a rank making progress: %+v %v", m, err)
	}
	// One long unit sizes the timeout: rank 1 reports a 300 ms unit and hands off only
	// once rank 0's receive has gone on past its 500 ms timeout (to 4 x 300 ms) on it.
	extended := ts[0].extended.Load()
	go func() {
		ts[1].Progress(300 * time.Millisecond)
		wait.For(10*time.Second, func() bool { return ts[0].extended.Load() > extended })
		ts[1].Send(context.Background(), 0, Message{Sample: 2})
	}()
	if m, err := ts[0].Recv(context.Background(), 1); err != nil || m.Sample != 2 {
		t.Fatalf("recv after a long unit of work: %+v %v", m, err)
	}
	// No progress at all: the timeout holds.
	start := time.Now()
	if _, err := ts[0].Recv(context.Background(), 1); !errors.Is(err, ErrTimeout) {
		t.Fatalf("recv from an idle rank: %v", err)
	}
	if d := time.Since(start); d > 4*300*time.Millisecond+2*time.Second {
		t.Fatalf("idle rank's recv waited %v", d)
	}
}

func TestTCPBusyRankIsNotAHang(t *testing.T) {
	// Rank 0 works on its first unit until rank 2's receive has outlasted its 300 ms
	// timeout twice on the strength of that unit in progress (its heartbeats report how
	// long it has lasted), then hands off to rank 1, which forwards to rank 2 at once. Rank
	// 2 waits on rank 1, idle behind busy rank 0: the world's progress, not its
	// neighbour's, says nothing hangs.
	ts := dialWorld(t, 3, Options{RecvTimeout: 300 * time.Millisecond, HeartbeatTimeout: time.Second})
	go func() {
		started := time.Now()
		ts[0].Working(started)
		wait.For(10*time.Second, func() bool { return ts[2].extended.Load() >= 2 }) // the first step
		ts[0].Progress(time.Since(started))
		ts[0].Send(context.Background(), 1, Message{Sample: 1})
	}()
	go func() {
		m, err := ts[1].Recv(context.Background(), 0)
		if err == nil {
			ts[1].Send(context.Background(), 2, m)
		}
	}()
	if m, err := ts[2].Recv(context.Background(), 1); err != nil || m.Sample != 1 {
		t.Fatalf("recv behind a busy rank: %+v %v", m, err)
	}
}
