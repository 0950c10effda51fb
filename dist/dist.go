// Package dist moves tensors between ranks. It owns the launcher environment (torchrun,
// LeaderWorkerSet names), the rendezvous store hosted by rank 0, the transports (TCP between
// processes, in-process channels for tests) and, later, process groups and collectives.
//
// Contract: every receive has a deadline; an error always names the local rank and the peer
// ("rank 3: recv from rank 2 (sample 12, step 8): ..."); sentinel errors carry the "dist:"
// prefix and are matched with errors.Is. The engine speaks only to the Transport interface.
package dist

import (
	"context"
	"errors"

	"github.com/vdpp/vdpp/tensor"
)

// Sentinel errors. Callers match them with errors.Is.
var (
	// ErrTimeout: a receive (or connect) passed its deadline.
	ErrTimeout = errors.New("dist: timeout")
	// ErrPeerGone: the peer closed the connection or died.
	ErrPeerGone = errors.New("dist: peer gone")
	// ErrClosed: the local transport was closed.
	ErrClosed = errors.New("dist: transport closed")
	// ErrBadFrame: a frame failed validation (magic, version, checksum, sizes).
	ErrBadFrame = errors.New("dist: bad frame")
	// ErrAuth: a connection did not present the run's secret.
	ErrAuth = errors.New("dist: authentication failed")
)

// NamedTensor is one tensor of a Message.
type NamedTensor struct {
	Name   string
	Tensor *tensor.Dense
}

// Message is what one rank hands to another: a sample id, the next step index and the
// tensors (by convention the latent first, then conditioning the first time a sample
// reaches a stage). Control messages may carry no tensors.
type Message struct {
	Sample  int64
	Step    int32
	Tensors []NamedTensor
}

// Tensor returns the tensor called name, or nil.
func (m Message) Tensor(name string) *tensor.Dense {
	for _, nt := range m.Tensors {
		if nt.Name == name {
			return nt.Tensor
		}
	}
	return nil
}

// Transport is a point-to-point link from this rank to every other rank of the world.
// Send and Recv are safe for concurrent use by one sender and one receiver per peer;
// messages between a pair of ranks arrive in the order they were sent.
type Transport interface {
	Rank() int
	Size() int
	// Send delivers m to rank `to`. It may return before the peer has read it.
	Send(ctx context.Context, to int, m Message) error
	// Recv returns the next message from rank `from`, waiting at most until ctx's deadline
	// or the transport's receive timeout, whichever is sooner.
	Recv(ctx context.Context, from int) (Message, error)
	Close() error
}
