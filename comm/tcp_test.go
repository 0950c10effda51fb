package comm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vdpp/vdpp/internal/wait"
	"github.com/vdpp/vdpp/tensor"
)

// freePort returns a TCP port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// dialWorld starts a TCP world of n ranks inside this process.
func dialWorld(t testing.TB, n int, opts Options) []*TCPTransport {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	if opts.ConnectTimeout == 0 {
		opts.ConnectTimeout = 10 * time.Second
	}
	return dialRanks(t, n, n, freePort(t), opts)
}

// dialRanks starts ranks 0..count-1 of a TCP world of n ranks on port inside this process
// (the others join from elsewhere).
func dialRanks(t testing.TB, n, count, port int, opts Options) []*TCPTransport {
	t.Helper()
	ts := make([]*TCPTransport, count)
	errs := make([]error, count)
	var wg sync.WaitGroup
	for r := range count {
		wg.Go(func() {
			env := Env{Rank: r, WorldSize: n, LocalRank: r, LocalWorldSize: n, MasterAddr: "127.0.0.1", MasterPort: port}
			ts[r], errs[r] = DialTCP(context.Background(), env, opts)
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	t.Cleanup(func() {
		for _, tr := range ts {
			tr.Close()
		}
	})
	return ts
}

// checkGoroutines fails when goroutines started since before are still running shortly
// after everything was closed.
func checkGoroutines(t *testing.T, before int) {
	t.Helper()
	if !wait.For(2*time.Second, func() bool { return runtime.NumGoroutine() <= before }) {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines before, %d after close:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
	}
}

// transportsOf adapts a world to []Transport for the shared semantic tests.
func tcpWorld(t *testing.T, n int, opts Options) []Transport {
	ts := dialWorld(t, n, opts)
	out := make([]Transport, n)
	for i, tr := range ts {
		out[i] = tr
	}
	return out
}

func TestTCPSemantics(t *testing.T) { testTransportSemantics(t, tcpWorld, false) }

func TestTCPGoroutinesExitOnClose(t *testing.T) {
	before := runtime.NumGoroutine()
	ts := dialWorld(t, 3, Options{})
	ctx := context.Background()
	for i := range 3 {
		if err := ts[i].Send(ctx, (i+1)%3, Message{Sample: int64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		if _, err := ts[i].Recv(ctx, (i+2)%3); err != nil {
			t.Fatal(err)
		}
	}
	for _, tr := range ts {
		tr.Close()
	}
	checkGoroutines(t, before)
}

func TestTCPRefusesStranger(t *testing.T) {
	var logs bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))
	ts := dialWorld(t, 2, Options{Logger: logger})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	addr := ts[1].ln.Addr().String()
	tests := []struct {
		name   string
		rank   int
		secret []byte
		reason string
	}{
		{"wrong secret", 0, make([]byte, SecretLen), "wrong secret"},
		{"right secret, wrong direction", 1, ts[0].secret, "may not dial"},
		{"right secret, already connected", 0, ts[0].secret, "already connected"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := dialPeer(ctx, addr, tc.rank, 2, tc.secret)
			if !errors.Is(err, ErrAuth) {
				t.Fatalf("stranger got %v, want ErrAuth", err)
			}
			var got string
			if !wait.For(2*time.Second, func() bool {
				mu.Lock()
				got = logs.String()
				mu.Unlock()
				return strings.Contains(got, "refused connection") && strings.Contains(got, tc.reason)
			}) {
				t.Fatalf("log does not mention the refusal %q:\n%s", tc.reason, got)
			}
		})
	}
	// Raw garbage is refused too, and the world still works.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.Write(bytes.Repeat([]byte("x"), helloLen))
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Fatalf("garbage hello answered: %d %v", n, err)
	}
	c.Close()
	if err := ts[0].Send(ctx, 1, Message{Sample: 9}); err != nil {
		t.Fatal(err)
	}
	if m, err := ts[1].Recv(ctx, 0); err != nil || m.Sample != 9 {
		t.Fatalf("after strangers: %+v %v", m, err)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// waitRecvBlocked returns once tr has a receive waiting for a message (10 s at most), so a
// test can act on a pending receive without guessing how long it takes to block.
func waitRecvBlocked(t testing.TB, tr Transport) {
	t.Helper()
	var blocked func() int32
	switch x := tr.(type) {
	case *TCPTransport:
		blocked = x.blocked.Load
	case *LocalTransport:
		blocked = x.blocked.Load
	default:
		t.Fatalf("no receive count for %T", tr)
	}
	if !wait.For(10*time.Second, func() bool { return blocked() > 0 }) {
		t.Fatal("the receive never blocked")
	}
}

func TestTCPPeerResetIsPrompt(t *testing.T) {
	ts := dialWorld(t, 2, Options{RecvTimeout: 30 * time.Second})
	got := make(chan error, 1)
	go func() {
		_, err := ts[1].Recv(context.Background(), 0)
		got <- err
	}()
	waitRecvBlocked(t, ts[1])
	// Kill the connection under rank 0 as a crash would (no orderly Close).
	ts[0].peers[1].conn.(*net.TCPConn).SetLinger(0)
	ts[0].peers[1].conn.Close()
	start := time.Now()
	select {
	case err := <-got:
		if !errors.Is(err, ErrPeerGone) || !errors.Is(err, ErrPeerLost) || !strings.HasPrefix(err.Error(), "rank 1: recv from rank 0: comm: lost rank 0 (node ") ||
			!strings.HasSuffix(err.Error(), "its connection was reset (process ended or killed)") {
			t.Fatalf("err = %v", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("took %v", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Recv from a dead peer still waiting")
	}
}

func TestTCPBackPressure(t *testing.T) {
	ts := dialWorld(t, 2, Options{QueueDepth: 2})
	big := Message{Tensors: []NamedTensor{{"x", tensor.New(1 << 20)}}} // 4 MiB a message
	var err error
	sent := 0
	for ; sent < 200; sent++ {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err = ts[0].Send(ctx, 1, big)
		cancel()
		if err != nil {
			break
		}
	}
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("after %d sends to a peer that does not read: %v, want a timeout", sent, err)
	}
	// The receiver drains what was queued, in order, and the link still works.
	for i := range sent {
		if _, err := ts[1].Recv(context.Background(), 0); err != nil {
			t.Fatalf("recv %d of %d: %v", i, sent, err)
		}
	}
}

func BenchmarkTCPPingPong(b *testing.B) {
	for _, floats := range []int{4 << 10, 512 << 10} {
		b.Run(fmt.Sprintf("%dKiB", floats*4>>10), func(b *testing.B) {
			ts := dialWorld(b, 2, Options{})
			m := Message{Sample: 1, Step: 2, Tensors: []NamedTensor{{"latent", tensor.New(floats)}}}
			ctx := context.Background()
			b.SetBytes(int64(floats * 4))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := ts[0].Send(ctx, 1, m); err != nil {
					b.Fatal(err)
				}
				r, err := ts[1].Recv(ctx, 0)
				if err != nil {
					b.Fatal(err)
				}
				if err := ts[1].Send(ctx, 0, r); err != nil {
					b.Fatal(err)
				}
				if _, err := ts[0].Recv(ctx, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
