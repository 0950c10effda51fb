package comm

import (
	"errors"
	"io"
	"net"
	"sync"
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

// writeLoop writes queued messages, batching whatever is queued into one writev. On Close
// it writes what is still queued, half-closes the connection and stops.
func (p *tcpPeer) writeLoop(c net.Conn) {
	defer p.t.writers.Done()
	held := make([][]byte, 0, maxWriteBatch)
	backing := make(net.Buffers, 0, maxWriteBatch)
	for {
		closing := false
		select {
		case b := <-p.sendq:
			held = append(held[:0], b)
		case <-p.dead:
			return
		case <-p.t.closing:
			closing = true
			held = held[:0]
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
			p.fail(peerGone(err))
			return
		}
		if closing && len(held) < maxWriteBatch {
			if tc, ok := c.(*net.TCPConn); ok {
				tc.CloseWrite()
			}
			return
		}
	}
}

// readLoop decodes messages into the peer's queues until the connection fails: tagged
// messages into their mailbox at once, default-channel ones into recvq, waiting while it is
// full (which holds back the sender: back-pressure).
func (p *tcpPeer) readLoop(c net.Conn) {
	defer p.t.wg.Done()
	fr := NewFrameReader(c, tcpReadBuffer, p.t.opts.MaxFrameSize)
	for {
		m, err := fr.ReadMessage()
		if err != nil {
			select {
			case <-p.t.closed:
				p.fail(ErrClosed)
			default:
				p.fail(peerGone(err))
			}
			return
		}
		if m.Tag != 0 {
			p.boxes.box(m.Tag).put(m)
			continue
		}
		select {
		case p.recvq <- m:
		case <-p.dead:
			return
		case <-p.t.closed:
			p.fail(ErrClosed)
			return
		}
	}
}
