package comm

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vdpp/vdpp/tensor"
)

// errLocalClosed is the cause given when an in-process peer closed its transport.
var errLocalClosed = errors.New("closed")

// localWorld is the shared state of an in-process world.
type localWorld struct {
	opts   Options
	queues [][]chan Message // queues[from][to]: the default channel (tag 0)
	tagged [][]mailboxes    // tagged[from][to]: the other tags
	done   []chan struct{}  // done[r] is closed when rank r closes
	once   []sync.Once
}

// LocalTransport is the in-process Transport made by NewLocal: buffered channels between
// goroutines, with the TCP transport's semantics (ordering, bounded queues, deadlines,
// errors naming both ranks, ErrPeerGone once a peer closed, tagged channels). Send
// deep-copies tensors, so ranks never share memory. It starts no goroutines.
type LocalTransport struct {
	w    *localWorld
	rank int
	// blocked counts the receives waiting for a message (tests wait on it to know a
	// receive is pending).
	blocked atomic.Int32
}

var _ TaggedTransport = (*LocalTransport)(nil)

// NewLocal returns the transports of an in-process world of the given size, indexed by
// rank. opts.RecvTimeout and opts.QueueDepth apply; the rest is ignored.
func NewLocal(world int, opts Options) []Transport {
	opts = opts.withDefaults()
	w := &localWorld{opts: opts, queues: make([][]chan Message, world), tagged: make([][]mailboxes, world),
		done: make([]chan struct{}, world), once: make([]sync.Once, world)}
	out := make([]Transport, world)
	for r := range world {
		w.done[r] = make(chan struct{})
		w.queues[r] = make([]chan Message, world)
		w.tagged[r] = make([]mailboxes, world)
		for to := range world {
			if to != r {
				w.queues[r][to] = make(chan Message, opts.QueueDepth)
			}
		}
		out[r] = &LocalTransport{w: w, rank: r}
	}
	return out
}

// Rank returns this transport's rank.
func (l *LocalTransport) Rank() int { return l.rank }

// Size returns the world size.
func (l *LocalTransport) Size() int { return len(l.w.done) }

func (l *LocalTransport) check(op string, r int) error {
	if r < 0 || r >= len(l.w.done) || r == l.rank {
		return fmt.Errorf("rank %d: %s rank %d: %w (world size %d)", l.rank, op, r, ErrNoPeer, len(l.w.done))
	}
	select {
	case <-l.w.done[l.rank]:
		return fmt.Errorf("rank %d: %s rank %d: %w", l.rank, op, r, ErrClosed)
	default:
	}
	return nil
}

// Send deep-copies m and queues it for rank to on m.Tag's channel. The default channel's
// queue is bounded (Send blocks while it is full); other tags queue without bound.
func (l *LocalTransport) Send(ctx context.Context, to int, m Message) error {
	if err := l.check("send to", to); err != nil {
		return err
	}
	select {
	case <-l.w.done[to]:
		return fmt.Errorf("rank %d: send to rank %d: %w", l.rank, to, peerGone(errLocalClosed))
	default:
	}
	if _, err := MessageLen(m); err != nil {
		return fmt.Errorf("rank %d: send to rank %d (sample %d, step %d): %w", l.rank, to, m.Sample, m.Step, err)
	}
	c := Message{Sample: m.Sample, Step: m.Step, Tag: m.Tag}
	if len(m.Tensors) > 0 {
		c.Tensors = make([]NamedTensor, len(m.Tensors))
		for i, nt := range m.Tensors {
			c.Tensors[i] = NamedTensor{Name: nt.Name, Tensor: cloneTensor(nt.Tensor)}
		}
	}
	if c.Tag != 0 {
		l.w.tagged[l.rank][to].box(c.Tag).put(c)
		return nil
	}
	q := l.w.queues[l.rank][to]
	select {
	case q <- c:
		return nil
	default:
	}
	wait, byCtx := waitBound(ctx, l.w.opts.RecvTimeout)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	var err error
	select {
	case q <- c:
		return nil
	case <-l.w.done[to]:
		err = peerGone(errLocalClosed)
	case <-l.w.done[l.rank]:
		err = ErrClosed
	case <-ctx.Done():
		err = waitError(ctx, wait, byCtx)
	case <-timer.C:
		err = waitError(ctx, wait, byCtx)
	}
	return fmt.Errorf("rank %d: send to rank %d: %w", l.rank, to, err)
}

// cloneTensor deep-copies t, keeping a nil Shape nil (a scalar).
func cloneTensor(t *tensor.Dense) *tensor.Dense {
	c := &tensor.Dense{Data: append([]float32(nil), t.Data...)}
	if t.Shape != nil {
		c.Shape = append([]int(nil), t.Shape...)
	}
	if c.Data == nil {
		c.Data = []float32{}
	}
	return c
}

// Recv returns the next message from rank from; messages queued before the peer closed
// are still delivered.
func (l *LocalTransport) Recv(ctx context.Context, from int) (Message, error) {
	if err := l.check("recv from", from); err != nil {
		return Message{}, err
	}
	q := l.w.queues[from][l.rank]
	select {
	case m := <-q:
		return m, nil
	default:
	}
	wait, byCtx := waitBound(ctx, l.w.opts.RecvTimeout)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	l.blocked.Add(1)
	defer l.blocked.Add(-1)
	var err error
	select {
	case m := <-q:
		return m, nil
	case <-l.w.done[from]:
		select {
		case m := <-q:
			return m, nil
		default:
		}
		err = peerGone(errLocalClosed)
	case <-l.w.done[l.rank]:
		err = ErrClosed
	case <-ctx.Done():
		err = waitError(ctx, wait, byCtx)
	case <-timer.C:
		err = waitError(ctx, wait, byCtx)
	}
	return Message{}, fmt.Errorf("rank %d: recv from rank %d: %w", l.rank, from, err)
}

// RecvTag returns the next message of channel tag from rank from (tag 0 is Recv).
func (l *LocalTransport) RecvTag(ctx context.Context, from int, tag uint16) (Message, error) {
	if tag == 0 {
		return l.Recv(ctx, from)
	}
	if err := l.check("recv from", from); err != nil {
		return Message{}, err
	}
	b := l.w.tagged[from][l.rank].box(tag)
	l.blocked.Add(1)
	m, err := recvBox(ctx, b, l.w.opts.RecvTimeout, l.w.done[from], func() error { return peerGone(errLocalClosed) }, l.w.done[l.rank], func() error { return ErrClosed }, nil)
	l.blocked.Add(-1)
	if err != nil {
		return Message{}, fmt.Errorf("rank %d: recv from rank %d: %w", l.rank, from, err)
	}
	return m, nil
}

// Close marks this rank gone: its own Send and Recv fail with ErrClosed, and its peers'
// Recv from it fail with ErrPeerGone once they have drained what it sent.
func (l *LocalTransport) Close() error {
	l.w.once[l.rank].Do(func() { close(l.w.done[l.rank]) })
	return nil
}
