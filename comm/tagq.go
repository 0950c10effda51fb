package comm

import (
	"context"
	"sync"
	"time"
)

// mailbox is the unbounded FIFO of one (peer, nonzero tag) channel. put never blocks;
// signal holds at most one wake-up, and take re-arms it while messages remain, so any
// number of waiters all make progress.
type mailbox struct {
	mu     sync.Mutex
	msgs   []Message
	signal chan struct{}
}

func (b *mailbox) put(m Message) {
	b.mu.Lock()
	b.msgs = append(b.msgs, m)
	b.mu.Unlock()
	b.wake()
}

func (b *mailbox) wake() {
	select {
	case b.signal <- struct{}{}:
	default:
	}
}

// take pops the oldest message, if any.
func (b *mailbox) take() (Message, bool) {
	b.mu.Lock()
	if len(b.msgs) == 0 {
		b.mu.Unlock()
		return Message{}, false
	}
	m := b.msgs[0]
	b.msgs[0] = Message{}
	b.msgs = b.msgs[1:]
	more := len(b.msgs) > 0
	if !more {
		b.msgs = nil
	}
	b.mu.Unlock()
	if more {
		b.wake()
	}
	return m, true
}

// mailboxes holds the mailbox of every nonzero tag seen on one directed link.
type mailboxes struct {
	mu    sync.Mutex
	boxes map[uint16]*mailbox
}

// box returns the mailbox of tag, creating it on first use.
func (mb *mailboxes) box(tag uint16) *mailbox {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	if mb.boxes == nil {
		mb.boxes = make(map[uint16]*mailbox)
	}
	b := mb.boxes[tag]
	if b == nil {
		b = &mailbox{signal: make(chan struct{}, 1)}
		mb.boxes[tag] = b
	}
	return b
}

// recvBox waits for the next message of b. When dead closes, what is already queued is
// still delivered, then deadErr() is returned; closing (the local transport closed) gives
// closedErr(); the wait is bounded by ctx and limit as every receive is, and when limit
// runs out, extend (when not nil) may lengthen it (the peer's progress). The error is bare:
// the caller adds the ranks.
func recvBox(ctx context.Context, b *mailbox, limit time.Duration, dead <-chan struct{}, deadErr func() error,
	closing <-chan struct{}, closedErr func() error, extend func(start time.Time, limit time.Duration) (time.Duration, bool)) (Message, error) {
	if m, ok := b.take(); ok {
		return m, nil
	}
	start := time.Now()
	wait, byCtx := waitBound(ctx, limit)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case <-b.signal:
			if m, ok := b.take(); ok {
				return m, nil
			}
		case <-dead:
			if m, ok := b.take(); ok {
				return m, nil
			}
			return Message{}, deadErr()
		case <-closing:
			return Message{}, closedErr()
		case <-ctx.Done():
			return Message{}, waitError(ctx, wait, byCtx)
		case <-timer.C:
			if extend != nil && !byCtx {
				if more, ok := extend(start, wait); ok {
					timer.Reset(more)
					continue
				}
			}
			return Message{}, waitError(ctx, wait, byCtx)
		}
	}
}
