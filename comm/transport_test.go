package comm

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/vdpp/vdpp/tensor"
)

// worldFunc builds a world of n connected transports (closed by the test's cleanup).
type worldFunc func(t *testing.T, n int, opts Options) []Transport

// inBubble is the body of a test of a world: f in a testing/synctest bubble, on a fake
// clock, for an in-process world (fake), where a timeout is exact and costs no time; f
// itself for a world over sockets, which a bubble cannot hold.
func inBubble(fake bool, f func(*testing.T)) func(*testing.T) {
	if !fake {
		return f
	}
	return func(t *testing.T) { synctest.Test(t, f) }
}

// testTransportSemantics checks what every Transport promises; fake runs each check in a
// synctest bubble (in-process worlds).
func testTransportSemantics(t *testing.T, world worldFunc, fake bool) {
	t.Run("ring ordering and content", inBubble(fake, func(t *testing.T) {
		const n, msgs = 3, 50
		ts := world(t, n, Options{})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var wg sync.WaitGroup
		errs := make([]error, n)
		for r := range n {
			if ts[r].Rank() != r || ts[r].Size() != n {
				t.Fatalf("rank %d reports %d of %d", r, ts[r].Rank(), ts[r].Size())
			}
			wg.Go(func() {
				for i := range msgs {
					lat := mustTensor(t, 2, 3, 4)
					lat.Data[0] = float32(r*1000 + i)
					m := Message{Sample: int64(i), Step: int32(r), Tensors: []NamedTensor{{"latent", lat}}}
					if i%5 == 0 {
						m.Tensors = append(m.Tensors, NamedTensor{"cond", mustTensor(t, 7)})
					}
					if i%7 == 0 {
						m.Tensors = nil
					}
					if err := ts[r].Send(ctx, (r+1)%n, m); err != nil {
						errs[r] = err
						return
					}
				}
			})
		}
		for r := range n {
			from := (r + n - 1) % n
			for i := range msgs {
				m, err := ts[r].Recv(ctx, from)
				if err != nil {
					t.Fatalf("rank %d msg %d: %v", r, i, err)
				}
				if m.Sample != int64(i) || m.Step != int32(from) {
					t.Fatalf("rank %d msg %d: sample %d step %d", r, i, m.Sample, m.Step)
				}
				wantTensors := 1
				if i%7 == 0 {
					wantTensors = 0
				} else if i%5 == 0 {
					wantTensors = 2
				}
				if len(m.Tensors) != wantTensors {
					t.Fatalf("rank %d msg %d: %d tensors, want %d", r, i, len(m.Tensors), wantTensors)
				}
				if wantTensors > 0 {
					want := mustTensor(t, 2, 3, 4)
					want.Data[0] = float32(from*1000 + i)
					if !tensor.BitEqual(m.Tensor("latent"), want) {
						t.Fatalf("rank %d msg %d: latent differs", r, i)
					}
				}
			}
		}
		wg.Wait()
		for r, err := range errs {
			if err != nil {
				t.Fatalf("rank %d send: %v", r, err)
			}
		}
	}))
	t.Run("send does not share memory", inBubble(fake, func(t *testing.T) {
		ts := world(t, 2, Options{})
		ctx := context.Background()
		x := mustTensor(t, 4)
		if err := ts[0].Send(ctx, 1, Message{Tensors: []NamedTensor{{"x", x}}}); err != nil {
			t.Fatal(err)
		}
		x.Data[0] = 999
		m, err := ts[1].Recv(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		if m.Tensors[0].Tensor.Data[0] == 999 {
			t.Fatal("receiver sees the sender's later write")
		}
	}))
	t.Run("timeout names ranks", inBubble(fake, func(t *testing.T) {
		ts := world(t, 2, Options{RecvTimeout: 50 * time.Millisecond})
		start := time.Now()
		_, err := ts[1].Recv(context.Background(), 0)
		if !errors.Is(err, ErrTimeout) || err.Error() != "rank 1: recv from rank 0: comm: timeout after 50ms" {
			t.Fatalf("err = %v", err)
		}
		if d := time.Since(start); d < 50*time.Millisecond || d > 2*time.Second || fake && d != 50*time.Millisecond {
			t.Fatalf("waited %v", d)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		if _, err := ts[0].Recv(ctx, 1); !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("ctx deadline: %v", err)
		}
		cctx, ccancel := context.WithCancel(context.Background())
		ccancel()
		if _, err := ts[0].Recv(cctx, 1); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled ctx: %v", err)
		}
	}))
	t.Run("bad peers", inBubble(fake, func(t *testing.T) {
		ts := world(t, 2, Options{})
		ctx := context.Background()
		for _, r := range []int{-1, 0, 2} {
			if err := ts[0].Send(ctx, r, Message{}); !errors.Is(err, ErrNoPeer) {
				t.Fatalf("send to %d: %v", r, err)
			}
			if _, err := ts[0].Recv(ctx, r); !errors.Is(err, ErrNoPeer) {
				t.Fatalf("recv from %d: %v", r, err)
			}
		}
		if err := ts[0].Send(ctx, 1, Message{Tensors: []NamedTensor{{"x", nil}}}); !errors.Is(err, ErrBadFrame) {
			t.Fatalf("nil tensor: %v", err)
		}
	}))
	t.Run("tagged channels", inBubble(fake, func(t *testing.T) {
		ts := world(t, 2, Options{RecvTimeout: 5 * time.Second, QueueDepth: 4})
		ctx := context.Background()
		tags := []uint16{0, 9, 0xffff}
		// Interleave three channels; fill the default one up to its queue depth.
		for i := range 4 {
			for _, tag := range tags {
				m := Message{Sample: int64(tag)*100 + int64(i), Tag: tag, Tensors: []NamedTensor{{"x", mustTensor(t, i+1)}}}
				if err := ts[0].Send(ctx, 1, m); err != nil {
					t.Fatal(err)
				}
			}
		}
		rt := ts[1].(TaggedTransport)
		// The tagged channels are read first, in reverse tag order, while the default
		// channel is full and unread: each keeps its own order and never sees the others.
		for _, tag := range []uint16{0xffff, 9} {
			for i := range 4 {
				m, err := rt.RecvTag(ctx, 0, tag)
				if err != nil {
					t.Fatalf("tag %d msg %d: %v", tag, i, err)
				}
				if m.Tag != tag || m.Sample != int64(tag)*100+int64(i) || !tensor.BitEqual(m.Tensor("x"), mustTensor(t, i+1)) {
					t.Fatalf("tag %d msg %d: got tag %d sample %d", tag, i, m.Tag, m.Sample)
				}
			}
		}
		for i := range 4 {
			m, err := rt.Recv(ctx, 0)
			if err != nil || m.Tag != 0 || m.Sample != int64(i) {
				t.Fatalf("default msg %d: %+v %v", i, m, err)
			}
		}
		if err := ts[0].Send(ctx, 1, Message{Sample: 77}); err != nil {
			t.Fatal(err)
		}
		if m, err := rt.RecvTag(ctx, 0, 0); err != nil || m.Sample != 77 {
			t.Fatalf("RecvTag of tag 0 is Recv: %+v %v", m, err)
		}
		short, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
		defer cancel()
		if _, err := rt.RecvTag(short, 0, 9); !errors.Is(err, ErrTimeout) || !strings.HasPrefix(err.Error(), "rank 1: recv from rank 0: comm: timeout after") {
			t.Fatalf("tagged timeout: %v", err)
		}
		if _, err := rt.RecvTag(ctx, 1, 9); !errors.Is(err, ErrNoPeer) {
			t.Fatalf("tagged recv from self: %v", err)
		}
		// Tagged messages sent before the peer closed are delivered, then the peer is gone.
		if err := ts[0].Send(ctx, 1, Message{Sample: 42, Tag: 9}); err != nil {
			t.Fatal(err)
		}
		ts[0].Close()
		if m, err := rt.RecvTag(ctx, 0, 9); err != nil || m.Sample != 42 {
			t.Fatalf("tagged message sent before close: %+v %v", m, err)
		}
		start := time.Now()
		if _, err := rt.RecvTag(ctx, 0, 9); !errors.Is(err, ErrPeerGone) || !strings.HasPrefix(err.Error(), "rank 1: recv from rank 0: comm: peer gone") {
			t.Fatalf("tagged recv from a closed peer: %v", err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("peer gone noticed after %v", d)
		}
		ts[1].Close()
		if _, err := rt.RecvTag(ctx, 0, 9); !errors.Is(err, ErrClosed) {
			t.Fatalf("tagged recv on a closed transport: %v", err)
		}
	}))
	t.Run("close", inBubble(fake, func(t *testing.T) {
		ts := world(t, 3, Options{RecvTimeout: 30 * time.Second})
		ctx := context.Background()
		// A message sent just before Close is still delivered, then the peer is gone.
		if err := ts[0].Send(ctx, 1, Message{Sample: 5}); err != nil {
			t.Fatal(err)
		}
		pending := make(chan error, 1)
		go func() {
			_, err := ts[2].Recv(ctx, 0)
			pending <- err
		}()
		waitRecvBlocked(t, ts[2])
		start := time.Now()
		if err := ts[0].Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-pending; !errors.Is(err, ErrPeerGone) || !strings.HasPrefix(err.Error(), "rank 2: recv from rank 0: comm: peer gone") {
			t.Fatalf("pending recv from closed rank: %v", err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("peer gone noticed after %v", d)
		}
		if m, err := ts[1].Recv(ctx, 0); err != nil || m.Sample != 5 {
			t.Fatalf("message sent before close: %+v %v", m, err)
		}
		if _, err := ts[1].Recv(ctx, 0); !errors.Is(err, ErrPeerGone) {
			t.Fatalf("later recv from closed rank: %v", err)
		}
		if err := ts[1].Send(ctx, 0, Message{}); err != nil && !errors.Is(err, ErrPeerGone) {
			t.Fatalf("send to closed rank: %v", err)
		}
		if _, err := ts[0].Recv(ctx, 1); !errors.Is(err, ErrClosed) {
			t.Fatalf("recv on closed transport: %v", err)
		}
		if err := ts[0].Send(ctx, 1, Message{}); !errors.Is(err, ErrClosed) {
			t.Fatalf("send on closed transport: %v", err)
		}
		if err := ts[0].Close(); err != nil {
			t.Fatalf("second close: %v", err)
		}
	}))
}
