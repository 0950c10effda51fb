package comm

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	// tcpReadBuffer is the read buffer of one connection.
	tcpReadBuffer = 512 << 10
	// maxWriteBatch bounds the queued messages one writev carries.
	maxWriteBatch = 64
	// freeBuffers bounds the encoded-message buffers kept for reuse per peer.
	freeBuffers = 4
	// closeFlushTimeout bounds how long Close waits for queued messages to go out.
	closeFlushTimeout = 2 * time.Second
)

// tcpPeer is this rank's link to one other rank.
type tcpPeer struct {
	t     *TCPTransport
	rank  int
	sendq chan []byte   // encoded messages for the writer
	free  chan []byte   // buffers the writer is done with
	recvq chan Message  // the default channel (tag 0)
	boxes mailboxes     // the other tags, unbounded
	ready chan struct{} // closed once a connection is attached
	dead  chan struct{} // closed (after err is set) when the link failed
	err   error
	once  sync.Once

	mu   sync.Mutex
	conn net.Conn

	lastRead   atomic.Int64 // unix ns when bytes last arrived
	delivering atomic.Bool  // the reader waits for room in recvq (not for the peer)
	goodbye    atomic.Bool  // the peer closes on purpose: its end of stream is no loss
	progress   atomic.Int64 // the peer's units of work, from its heartbeats
	progressAt atomic.Int64 // unix ns when progress last changed
	longestMS  atomic.Int32 // the peer's longest unit of work (the one in progress included)
}

func newPeer(t *TCPTransport, rank int) *tcpPeer {
	return &tcpPeer{
		t: t, rank: rank,
		sendq: make(chan []byte, t.opts.QueueDepth),
		free:  make(chan []byte, freeBuffers),
		recvq: make(chan Message, t.opts.QueueDepth),
		ready: make(chan struct{}),
		dead:  make(chan struct{}),
	}
}

// attach adopts an authenticated connection and starts its writer and reader. It reports
// false (and leaves c alone) when the peer already has one or the transport is closing.
func (p *tcpPeer) attach(c net.Conn) bool {
	t := p.t
	t.mu.Lock()
	defer t.mu.Unlock()
	select {
	case <-t.closing:
		return false
	default:
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn != nil {
		return false
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	p.conn = c
	p.lastRead.Store(time.Now().UnixNano())
	t.writers.Add(1)
	go p.writeLoop(c)
	t.wg.Add(1)
	go p.readLoop(c)
	close(p.ready)
	return true
}

// fail marks the link dead with err (first call wins) and closes the connection.
func (p *tcpPeer) fail(err error) {
	p.once.Do(func() {
		p.err = err
		close(p.dead)
		select {
		case <-p.t.closing:
		default:
			if errors.Is(err, io.EOF) {
				p.t.opts.Logger.Debug("comm: peer closed", "rank", p.t.rank, "peer", p.rank)
			} else {
				p.t.opts.Logger.Warn("comm: peer link failed", "rank", p.t.rank, "peer", p.rank, "err", err)
			}
		}
	})
	p.closeConn()
}

func (p *tcpPeer) connected() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.conn != nil
}

func (p *tcpPeer) closeConn() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn != nil {
		p.conn.Close()
	}
}

func (p *tcpPeer) setWriteDeadline(d time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn != nil {
		p.conn.SetWriteDeadline(d)
	}
}

// writeLoop writes queued messages, batching whatever is queued into one writev, and a
// heartbeat whenever the heartbeat interval passes. On Close it writes what is still
// queued, then a goodbye, and half-closes the connection; when the world ended early it
// writes an abort frame instead, at once.
func (p *tcpPeer) writeLoop(c net.Conn) {
	defer p.t.writers.Done()
	held := make([][]byte, 0, maxWriteBatch)
	backing := make(net.Buffers, 0, maxWriteBatch)
	var beat <-chan time.Time
	if p.t.opts.HeartbeatTimeout > 0 {
		tick := time.NewTicker(p.t.opts.heartbeatInterval())
		defer tick.Stop()
		beat = tick.C
	}
	ctl := make([]byte, 0, FrameLen(0, 0, 0))
	for {
		closing := false
		select {
		case b := <-p.sendq:
			held = append(held[:0], b)
		case <-beat:
			if p.goodbye.Load() {
				continue // the peer is closing: nothing more to tell it
			}
			ctl = appendControl(ctl[:0], ctlHeartbeat, p.t.progress.Load(), p.t.heartbeatLongest())
			if _, err := c.Write(ctl); err != nil {
				return // the reader sees the broken link too, and says how it ended
			}
			continue
		case <-p.dead:
			return
		case <-p.t.closing:
			closing = true
			held = held[:0]
		}
		if closing {
			if e := p.t.end.Load(); e != nil {
				c.Write(appendControl(ctl[:0], ctlAbort, e.origin, e.reason))
				return
			}
		}
	gather:
		for len(held) < maxWriteBatch {
			select {
			case b := <-p.sendq:
				held = append(held, b)
			default:
				break gather
			}
		}
		var err error
		if len(held) > 0 {
			bufs := append(backing[:0], held...)
			_, err = bufs.WriteTo(c)
		}
		for i, b := range held {
			select {
			case p.free <- b:
			default:
			}
			held[i] = nil
		}
		if err != nil {
			// The reader sees the broken link too, and tells a goodbye from a loss. Sends
			// wait for that (p.dead), not for this writer.
			return
		}
		if closing && len(held) < maxWriteBatch {
			c.Write(appendControl(ctl[:0], ctlGoodbye, 0, 0))
			if tc, ok := c.(*net.TCPConn); ok {
				tc.CloseWrite()
			}
			return
		}
	}
}

// readLoop decodes messages into the peer's queues until the connection fails: tagged
// messages into their mailbox at once, default-channel ones into recvq, waiting while it is
// full (which holds back the sender: back-pressure). Control frames are the link's own:
// heartbeats (progress), goodbye, abort. The end of the stream without a goodbye, or a
// broken connection, is a lost peer.
func (p *tcpPeer) readLoop(c net.Conn) {
	defer p.t.wg.Done()
	fr := NewFrameReader(liveConn{c, &p.lastRead}, tcpReadBuffer, p.t.opts.MaxFrameSize)
	for {
		m, ctl, err := fr.next()
		if err != nil {
			select {
			case <-p.t.closed:
				p.fail(ErrClosed)
			default:
				switch {
				case p.goodbye.Load():
					p.fail(peerGone(err))
				case errors.Is(err, io.EOF):
					p.lost("its connection closed without a goodbye (process ended or killed)", err)
				case errors.Is(err, syscall.ECONNRESET):
					p.lost("its connection was reset (process ended or killed)", err)
				default:
					p.lost(err.Error(), err)
				}
			}
			return
		}
		switch ctl.Kind {
		case 0:
		case ctlHeartbeat:
			p.heard(ctl)
			continue
		case ctlGoodbye:
			p.goodbye.Store(true)
			continue
		case ctlAbort:
			p.reportedAbort(ctl)
			return
		default:
			continue // a kind from a later build: ignored
		}
		if m.Tag != 0 {
			p.boxes.box(m.Tag).put(m)
			continue
		}
		select {
		case p.recvq <- m:
			continue
		default:
		}
		p.delivering.Store(true)
		select {
		case p.recvq <- m:
		case <-p.dead:
			return
		case <-p.t.closed:
			p.fail(ErrClosed)
			return
		}
		p.lastRead.Store(time.Now().UnixNano())
		p.delivering.Store(false)
	}
}
