package comm

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// TCPTransport is the Transport between processes: one TCP connection per pair of ranks
// (the lower rank dials, the higher accepts after checking the run's secret), a writer
// goroutine per peer fed by a bounded queue of encoded messages, and a reader goroutine per
// peer decoding into a bounded queue (tagged channels: one unbounded mailbox per tag).
// Create it with Dial or DialTCP.
type TCPTransport struct {
	rank, world int
	opts        Options
	secret      []byte
	ln          net.Listener
	store       *StoreClient
	server      *Store
	peers       []*tcpPeer // nil at this rank

	closing   chan struct{} // Close started: writers drain and stop
	closed    chan struct{} // connections are being torn down
	closeOnce sync.Once
	writers   sync.WaitGroup
	wg        sync.WaitGroup // accept loop, handshakes, readers

	mu      sync.Mutex
	pending map[net.Conn]struct{} // handshakes in progress

	nodes     []string     // by rank: "host, ip" (from the rendezvous)
	progress  atomic.Int64 // units of work done (Progress)
	longestMS atomic.Int32 // the longest of them
	// workingSince is when the unit of work in progress started (unix ns; 0: none).
	workingSince atomic.Int64
	end          atomic.Pointer[ending] // set when the world ended early (a lost or failed rank)
	// blocked counts the receives waiting for a message (tests wait on it to know a
	// receive is pending).
	blocked atomic.Int32
	// extended counts the waits that outlasted their bound and went on because the world
	// reported progress (tests wait on it to know a receive outlived its timeout).
	extended atomic.Int32
}

var _ TaggedTransport = (*TCPTransport)(nil)

// Rank returns this process's rank.
func (t *TCPTransport) Rank() int { return t.rank }

// Size returns the world size.
func (t *TCPTransport) Size() int { return t.world }

// Store returns the client of the rendezvous store (nil in a world of one), for barriers
// and result collection. It stays usable until Close (rank 0 hosts the store and stops it
// on Close).
func (t *TCPTransport) Store() *StoreClient { return t.store }

// peer returns the link to rank r or an error naming op.
func (t *TCPTransport) peer(op string, r int) (*tcpPeer, error) {
	if r < 0 || r >= t.world || r == t.rank {
		return nil, fmt.Errorf("rank %d: %s rank %d: %w (world size %d)", t.rank, op, r, ErrNoPeer, t.world)
	}
	return t.peers[r], nil
}

// Send encodes m into a recycled buffer and queues it for the peer's writer. It blocks
// only while the peer's queue is full (back-pressure), at most until ctx's deadline or the
// receive timeout.
func (t *TCPTransport) Send(ctx context.Context, to int, m Message) error {
	p, err := t.peer("send to", to)
	if err != nil {
		return err
	}
	// Closed first: when this transport is closed its peers are dead too, and a select
	// with both ready would pick either at random.
	select {
	case <-t.closing:
		return fmt.Errorf("rank %d: send to rank %d: %w", t.rank, to, t.closedErr())
	default:
	}
	select {
	case <-p.dead:
		return fmt.Errorf("rank %d: send to rank %d: %w", t.rank, to, t.linkErr(p))
	default:
	}
	var buf []byte
	select {
	case buf = <-p.free:
	default:
	}
	buf, err = AppendMessage(buf[:0], m, t.opts.MaxFrameSize)
	if err != nil {
		return fmt.Errorf("rank %d: send to rank %d (sample %d, step %d): %w", t.rank, to, m.Sample, m.Step, err)
	}
	select {
	case p.sendq <- buf:
		return nil
	default:
	}
	w := newPeerWait(ctx, p, t.opts.RecvTimeout)
	defer w.timer.Stop()
	for {
		select {
		case p.sendq <- buf:
			return nil
		case <-p.dead:
			err = t.linkErr(p)
		case <-t.closing:
			err = t.closedErr()
		case <-ctx.Done():
			err = w.err()
		case <-w.timer.C:
			if w.extend() {
				continue
			}
			err = w.err()
		}
		return fmt.Errorf("rank %d: send to rank %d: %w", t.rank, to, err)
	}
}

// peerWait bounds a wait on a peer: the sooner of ctx's deadline and the receive timeout,
// the latter extended while the world reports progress (TCPTransport.extendWait).
type peerWait struct {
	ctx   context.Context
	p     *tcpPeer
	start time.Time
	wait  time.Duration
	byCtx bool
	timer *time.Timer
}

func newPeerWait(ctx context.Context, p *tcpPeer, limit time.Duration) *peerWait {
	w := &peerWait{ctx: ctx, p: p, start: time.Now()}
	w.wait, w.byCtx = waitBound(ctx, limit)
	w.timer = time.NewTimer(w.wait)
	return w
}

// extend re-arms the timer when the peer's progress allows more time.
func (w *peerWait) extend() bool {
	if more, ok := w.p.t.extendWait(w.start, w.wait); ok && !w.byCtx {
		w.timer.Reset(more)
		w.p.t.extended.Add(1)
		return true
	}
	return false
}

func (w *peerWait) err() error { return waitError(w.ctx, w.wait, w.byCtx) }

// Recv returns the next message from rank from. Messages that arrived before the peer
// died are still delivered; after that Recv fails at once with ErrPeerGone.
func (t *TCPTransport) Recv(ctx context.Context, from int) (Message, error) {
	p, err := t.peer("recv from", from)
	if err != nil {
		return Message{}, err
	}
	select {
	case <-t.closing:
		return Message{}, fmt.Errorf("rank %d: recv from rank %d: %w", t.rank, from, t.closedErr())
	default:
	}
	select {
	case m := <-p.recvq:
		return m, nil
	default:
	}
	w := newPeerWait(ctx, p, t.opts.RecvTimeout)
	defer w.timer.Stop()
	t.blocked.Add(1)
	defer t.blocked.Add(-1)
	for {
		select {
		case m := <-p.recvq:
			return m, nil
		case <-p.dead:
			select {
			case m := <-p.recvq:
				return m, nil
			default:
			}
			err = t.linkErr(p)
		case <-t.closing:
			err = t.closedErr()
		case <-ctx.Done():
			err = w.err()
		case <-w.timer.C:
			if w.extend() {
				continue
			}
			err = w.err()
		}
		return Message{}, fmt.Errorf("rank %d: recv from rank %d: %w", t.rank, from, err)
	}
}

// RecvTag returns the next message of channel tag from rank from (tag 0 is Recv).
// Messages that arrived before the peer died are still delivered.
func (t *TCPTransport) RecvTag(ctx context.Context, from int, tag uint16) (Message, error) {
	if tag == 0 {
		return t.Recv(ctx, from)
	}
	p, err := t.peer("recv from", from)
	if err != nil {
		return Message{}, err
	}
	select {
	case <-t.closing:
		return Message{}, fmt.Errorf("rank %d: recv from rank %d: %w", t.rank, from, t.closedErr())
	default:
	}
	t.blocked.Add(1)
	m, err := recvBox(ctx, p.boxes.box(tag), t.opts.RecvTimeout, p.dead, func() error { return t.linkErr(p) }, t.closing, t.closedErr, t.extendWait)
	t.blocked.Add(-1)
	if err != nil {
		return Message{}, fmt.Errorf("rank %d: recv from rank %d: %w", t.rank, from, err)
	}
	return m, nil
}

// Close flushes what is queued for each peer (briefly), closes every connection, stops
// every goroutine of the transport and, on rank 0, the rendezvous store.
func (t *TCPTransport) Close() error {
	t.closeOnce.Do(func() {
		t.mu.Lock() // attach and acceptLoop check closing under t.mu before adding goroutines
		close(t.closing)
		t.mu.Unlock()
		if t.ln != nil {
			t.ln.Close()
		}
		flushBy := time.Now().Add(closeFlushTimeout)
		for _, p := range t.peers {
			if p != nil {
				p.setWriteDeadline(flushBy)
			}
		}
		t.writers.Wait()
		close(t.closed)
		t.mu.Lock()
		for c := range t.pending {
			c.Close()
		}
		t.mu.Unlock()
		for _, p := range t.peers {
			if p != nil {
				p.closeConn()
			}
		}
		t.wg.Wait()
		if t.store != nil {
			t.store.Close()
		}
		if t.server != nil {
			t.server.Close()
		}
	})
	return nil
}
