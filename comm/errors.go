package comm

import (
	"errors"
	"fmt"
	"time"
)

// timeoutError is ErrTimeout with the wait that expired: "comm: timeout after 60s".
type timeoutError struct{ after time.Duration }

func (e *timeoutError) Error() string        { return ErrTimeout.Error() + " after " + fmtDuration(e.after) }
func (e *timeoutError) Is(target error) bool { return target == ErrTimeout }

// fmtDuration prints whole seconds as "60s" and otherwise as time.Duration does.
func fmtDuration(d time.Duration) string {
	switch {
	case d > 0 && d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	case d > 0 && d%time.Millisecond == 0 && d < time.Second:
		return fmt.Sprintf("%dms", d/time.Millisecond)
	}
	return d.String()
}

// peerGone wraps ErrPeerGone with its cause: "comm: peer gone: EOF".
func peerGone(cause error) error {
	if cause == nil {
		return ErrPeerGone
	}
	return fmt.Errorf("%w: %w", ErrPeerGone, cause)
}

// ErrNoPeer: a Send or Recv named a rank that is not a peer (out of range, or itself).
var ErrNoPeer = errors.New("comm: no such peer")
