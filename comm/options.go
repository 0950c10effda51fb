package comm

import (
	"context"
	"log/slog"
	"time"
)

// Defaults of Options.
const (
	DefaultRecvTimeout    = 60 * time.Second
	DefaultConnectTimeout = 120 * time.Second
	DefaultQueueDepth     = 16
	// DefaultHeartbeatTimeout is how long a peer may send nothing, not even a heartbeat,
	// before it is declared lost. Heartbeats go out five times per timeout, from a goroutine
	// of their own, so a slow step never delays them.
	DefaultHeartbeatTimeout = 5 * time.Second
)

// Options tune a transport. The zero value gives the defaults.
type Options struct {
	// RecvTimeout bounds every Recv (and a Send blocked by back-pressure) unless the
	// context's deadline is sooner. Default DefaultRecvTimeout.
	RecvTimeout time.Duration
	// ConnectTimeout bounds Dial: rendezvous plus connection set-up. Default
	// DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// Logger receives connection events (refused strangers, dead peers). Default slog.Default().
	Logger *slog.Logger
	// ListenHost is the host the data listener binds to. Default: the local address of the
	// connection to the store (the interface that reaches the master).
	ListenHost string
	// QueueDepth is how many messages may wait per peer and direction before Send blocks
	// (back-pressure). Default DefaultQueueDepth.
	QueueDepth int
	// MaxFrameSize bounds one frame on the wire. Default DefaultMaxFrameSize.
	MaxFrameSize int
	// HeartbeatTimeout is how long a TCP peer may stay silent before the world is declared
	// broken: every rank's operations then fail with ErrPeerLost naming the lost rank and its
	// node. Default DefaultHeartbeatTimeout; negative turns heartbeats off.
	HeartbeatTimeout time.Duration
	// ExternalStore: the rendezvous store at MASTER_ADDR:MASTER_PORT is hosted by someone
	// outside the world (a server's coordinator hosting its workers' cfg units), so rank 0
	// joins it like every other rank instead of listening there itself.
	ExternalStore bool
	// WaitReport is how often a rank waiting to join says what it waits for (rank 0, which
	// hosts the rendezvous: the ranks and nodes not arrived; another rank: rank 0's
	// rendezvous), on Logger. Default DefaultWaitReport; negative says nothing.
	WaitReport time.Duration
}

// DefaultWaitReport is Options.WaitReport's default.
const DefaultWaitReport = 5 * time.Second

// heartbeatInterval is how often a heartbeat goes out (and the watchdog looks).
func (o Options) heartbeatInterval() time.Duration {
	return max(o.HeartbeatTimeout/5, 10*time.Millisecond)
}

func (o Options) withDefaults() Options {
	if o.RecvTimeout <= 0 {
		o.RecvTimeout = DefaultRecvTimeout
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.WaitReport == 0 {
		o.WaitReport = DefaultWaitReport
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.QueueDepth <= 0 {
		o.QueueDepth = DefaultQueueDepth
	}
	if o.HeartbeatTimeout == 0 {
		o.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if o.MaxFrameSize <= 0 {
		o.MaxFrameSize = DefaultMaxFrameSize
	}
	return o
}

// waitBound returns how long an operation may wait: the sooner of ctx's deadline and
// limit, and whether ctx's deadline is the binding one.
func waitBound(ctx context.Context, limit time.Duration) (time.Duration, bool) {
	if d, ok := ctx.Deadline(); ok {
		if left := time.Until(d); left < limit {
			return left, true
		}
	}
	return limit, false
}

// waitError is the error for a wait that ended through ctx or its timer.
func waitError(ctx context.Context, wait time.Duration, byCtx bool) error {
	if err := ctx.Err(); err != nil && err != context.DeadlineExceeded {
		return err
	}
	if byCtx || ctx.Err() != nil {
		return &ctxTimeoutError{timeoutError{wait}}
	}
	return &timeoutError{wait}
}

// ctxTimeoutError is a timeout caused by the context's deadline: it matches both
// ErrTimeout and context.DeadlineExceeded.
type ctxTimeoutError struct{ timeoutError }

func (e *ctxTimeoutError) Is(target error) bool {
	return target == ErrTimeout || target == context.DeadlineExceeded
}
