package comm

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"time"
)

// Sentinel errors of a world that lost a member. Both also match ErrPeerGone.
var (
	// ErrPeerLost: a rank vanished: its process was killed, its node or its link went
	// away, or it sent nothing (not even a heartbeat) for the heartbeat timeout.
	ErrPeerLost = errors.New("comm: peer lost")
	// ErrPeerFailed: a rank ended the job with an error of its own (Abort).
	ErrPeerFailed = errors.New("comm: peer failed")
)

// controlKind is the kind of a control frame (Frame.Control).
type controlKind uint16

const (
	// ctlHeartbeat: the link is alive. A: the sender's units of work done so far; B: its
	// longest unit in milliseconds, the one in progress included (see Progress, Working).
	ctlHeartbeat controlKind = 1
	// ctlGoodbye: the sender closes the link on purpose; the end of the stream that follows
	// is not a loss.
	ctlGoodbye controlKind = 2
	// ctlAbort: the job is over. A: the rank the job lost; B: why (abortLost, abortFailed).
	ctlAbort controlKind = 3
)

// Reasons carried by ctlAbort.
const (
	abortLost   = 1
	abortFailed = 2
)

// control is one decoded control frame.
type control struct {
	Kind controlKind
	A    int64
	B    int32
}

// lostError says which rank the world lost and how. It matches its kind (ErrPeerLost or
// ErrPeerFailed) and ErrPeerGone, and unwraps to the cause.
type lostError struct {
	kind  error
	who   string // "rank 3 (node a, 10.0.0.2)"
	how   string // "no heartbeat or data for 5s", "reported by rank 0", ...
	cause error
}

func (e *lostError) Error() string {
	if e.kind == ErrPeerFailed {
		return fmt.Sprintf("comm: %s failed and ended the job (%s)", e.who, e.how)
	}
	return fmt.Sprintf("comm: lost %s: %s", e.who, e.how)
}

func (e *lostError) Is(target error) bool { return target == e.kind || target == ErrPeerGone }
func (e *lostError) Unwrap() error        { return e.cause }

// Progress tells the peers that this rank finished a unit of work (a denoising step, a
// sample's preparation or decode) that took work. A rank waiting on any peer extends its
// receive timeout while some rank of the world keeps making progress, to at least four
// times the longest unit reported, so a slow step is never taken for a hang (a rank idle
// behind a busy one included).
func (t *TCPTransport) Progress(work time.Duration) {
	t.workingSince.Store(0)
	t.progress.Add(1)
	ms := int32(min(work.Milliseconds(), int64(1<<31-1)))
	for {
		old := t.longestMS.Load()
		if ms <= old || t.longestMS.CompareAndSwap(old, ms) {
			return
		}
	}
}

// Working tells the peers that this rank started a unit of work at since: until Progress
// reports its end, the unit counts as long as it has lasted, so even a first step longer
// than the receive timeout is not a fault.
func (t *TCPTransport) Working(since time.Time) { t.workingSince.Store(since.UnixNano()) }

// heartbeatLongest is what a heartbeat reports as this rank's longest unit of work, in
// milliseconds: the longest finished, or the one in progress if it has lasted longer.
func (t *TCPTransport) heartbeatLongest() int32 {
	ms := t.longestMS.Load()
	if since := t.workingSince.Load(); since > 0 {
		ms = max(ms, int32(min(time.Since(time.Unix(0, since)).Milliseconds(), int64(1<<31-1))))
	}
	return ms
}

// ProgressReporter is a transport whose peers learn of this rank's work (see
// TCPTransport.Progress and Working).
type ProgressReporter interface {
	Progress(work time.Duration)
	Working(since time.Time)
}

// ReportProgress reports a finished unit of work to tr's peers when tr carries progress.
func ReportProgress(tr Transport, work time.Duration) {
	if p, ok := tr.(ProgressReporter); ok {
		p.Progress(work)
	}
}

// ReportWorking reports the start of a unit of work to tr's peers when tr carries progress.
func ReportWorking(tr Transport, since time.Time) {
	if p, ok := tr.(ProgressReporter); ok {
		p.Working(since)
	}
}

// Aborter is a transport that can end the whole job: its peers fail at once with an error
// naming this rank, instead of waiting for a hand-off that will never come.
type Aborter interface {
	Abort(cause error)
}

// CloseWith closes tr after a rank's work ended with err: Abort when err is not nil (and tr
// can), Close otherwise.
func CloseWith(tr Transport, err error) error {
	if a, ok := tr.(Aborter); ok && err != nil {
		a.Abort(err)
		return nil
	}
	return tr.Close()
}

// Abort ends the job: every peer is told that this rank failed (and fails its own pending
// and later operations with ErrPeerFailed naming this rank), and the transport closes.
func (t *TCPTransport) Abort(cause error) {
	t.abort(fmt.Errorf("rank %d ended the job: %w", t.rank, cause), int64(t.rank), abortFailed)
	t.Close()
}

// ending is why a world ended early: the error every later operation returns, and what the
// writers tell the peers (the rank the job lost and why).
type ending struct {
	err    error
	origin int64
	reason int32
}

// abort records the first reason the world ends and starts closing (in the background:
// abort is called from the goroutines Close waits for).
func (t *TCPTransport) abort(err error, origin int64, reason int32) {
	if !t.end.CompareAndSwap(nil, &ending{err: err, origin: origin, reason: reason}) {
		return
	}
	select {
	case <-t.closing: // already closing on purpose: nothing to tell
	default:
		if origin != int64(t.rank) { // this rank's own failure is its caller's to report
			t.opts.Logger.Error("comm: ending the job", "rank", t.rank, "err", err)
		}
	}
	if t.store != nil {
		t.store.abort(err)
	}
	go t.Close()
}

// aborted returns why the world ended, or nil.
func (t *TCPTransport) aborted() error {
	if e := t.end.Load(); e != nil {
		return e.err
	}
	return nil
}

// linkErr is the error of an operation on p after its link ended: the world's end when it
// ended, else the link's own.
func (t *TCPTransport) linkErr(p *tcpPeer) error {
	if err := t.aborted(); err != nil {
		return err
	}
	return p.err
}

// closedErr is the error of an operation after Close (or the world's end).
func (t *TCPTransport) closedErr() error {
	if err := t.aborted(); err != nil {
		return err
	}
	return ErrClosed
}

// describe names rank r with its node: "rank 3 (node a, 10.0.0.2)".
func (t *TCPTransport) describe(r int) string {
	if r < 0 || r >= len(t.nodes) || t.nodes[r] == "" {
		return fmt.Sprintf("rank %d", r)
	}
	return fmt.Sprintf("rank %d (node %s)", r, t.nodes[r])
}

// nodeName is how this process's node is named to the others: its host name and the
// address it reaches the store from.
func nodeName(local net.Addr) string {
	host, _ := os.Hostname()
	ip := ""
	if a, ok := local.(*net.TCPAddr); ok {
		ip = a.IP.String()
	}
	switch {
	case host == "":
		return ip
	case ip == "":
		return host
	}
	return host + ", " + ip
}

// lost fails p as vanished (how says why) and ends the world.
func (p *tcpPeer) lost(how string, cause error) {
	t := p.t
	select {
	case <-t.closing:
		p.fail(ErrClosed)
		return
	default:
	}
	err := &lostError{kind: ErrPeerLost, who: t.describe(p.rank), how: how, cause: cause}
	p.fail(err)
	t.abort(err, int64(p.rank), abortLost)
}

// reportedAbort ends the world because peer p says the job is over.
func (p *tcpPeer) reportedAbort(c control) {
	t := p.t
	origin := int(c.A)
	kind, how := ErrPeerLost, fmt.Sprintf("reported by %s", t.describe(p.rank))
	if c.B == abortFailed {
		kind = ErrPeerFailed
		if origin == p.rank {
			how = "its own error; see its log"
		}
	}
	err := &lostError{kind: kind, who: t.describe(origin), how: how}
	p.fail(err)
	t.abort(err, int64(origin), c.B)
}

// liveConn records when bytes last arrived from the peer.
type liveConn struct {
	net.Conn
	last *atomic.Int64
}

func (c liveConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.last.Store(time.Now().UnixNano())
	}
	return n, err
}

// watchdog declares lost every peer that sent nothing for the heartbeat timeout while this
// rank was ready to read from it (a reader held up by a full local queue is not waiting
// on the peer).
func (t *TCPTransport) watchdog() {
	defer t.wg.Done()
	tick := time.NewTicker(t.opts.heartbeatInterval())
	defer tick.Stop()
	for {
		select {
		case <-t.closing:
			return
		case <-tick.C:
		}
		now := time.Now().UnixNano()
		for _, p := range t.peers {
			if p == nil || !p.connected() || p.delivering.Load() {
				continue
			}
			select {
			case <-p.dead:
				continue
			default:
			}
			if silent := time.Duration(now - p.lastRead.Load()); silent > t.opts.HeartbeatTimeout {
				p.lost(fmt.Sprintf("no heartbeat or data for %s (node or link down?)", fmtDuration(t.opts.HeartbeatTimeout.Round(time.Millisecond))), nil)
			}
		}
	}
}

// extendWait says how much longer a wait that started at start may last, given the
// progress the world reported: at least limit, or four times the longest unit of work any
// peer reported (the one in progress included), from the later of start and the last time
// any peer made progress. Any rank counts: a rank waiting on an idle peer that itself waits
// on a busy one is not hung.
func (t *TCPTransport) extendWait(start time.Time, limit time.Duration) (time.Duration, bool) {
	bound, from := limit, start
	for _, p := range t.peers {
		if p == nil {
			continue
		}
		bound = max(bound, 4*time.Duration(p.longestMS.Load())*time.Millisecond)
		if at := p.progressAt.Load(); at > 0 && time.Unix(0, at).After(from) {
			from = time.Unix(0, at)
		}
	}
	left := time.Until(from.Add(bound))
	return left, left > 0
}

// heard records a heartbeat's progress.
func (p *tcpPeer) heard(c control) {
	if c.A != p.progress.Load() {
		p.progress.Store(c.A)
		p.progressAt.Store(time.Now().UnixNano())
	}
	p.longestMS.Store(c.B)
}
