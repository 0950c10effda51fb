// Package comm moves tensors between ranks. It owns the launcher environment (torchrun,
// LeaderWorkerSet names), the rendezvous store hosted by rank 0, the transports (TCP between
// processes, in-process channels for tests), the device mesh (pp x cfg x cp x dp), process
// groups and the collectives over them (all-gather, all-to-all, broadcast, barrier,
// all-reduce), built only on tagged point-to-point messages.
//
// Contract: every receive has a deadline (extended while the peer reports progress, see
// TCPTransport.Progress); an error always names the local rank and the peer ("rank 3: recv
// from rank 2 (sample 12, step 8): ..."); sentinel errors carry the "comm:" prefix and are
// matched with errors.Is. A TCP world fails as a whole: every link carries heartbeats, and
// a rank that is lost (killed, its node or link down, silent past the heartbeat timeout) or
// that fails (Abort) ends every rank's pending and later operations with ErrPeerLost or
// ErrPeerFailed naming that rank and its node; a rank that closes on purpose says goodbye
// and ends nothing. The engine speaks only to the Transport interface.
package comm

import (
	"context"
	"errors"

	"github.com/vdpp/vdpp/tensor"
)

// Sentinel errors. Callers match them with errors.Is.
var (
	// ErrTimeout: a receive (or connect) passed its deadline.
	ErrTimeout = errors.New("comm: timeout")
	// ErrPeerGone: the peer closed the connection or died.
	ErrPeerGone = errors.New("comm: peer gone")
	// ErrClosed: the local transport was closed.
	ErrClosed = errors.New("comm: transport closed")
	// ErrBadFrame: a frame failed validation (magic, version, checksum, sizes).
	ErrBadFrame = errors.New("comm: bad frame")
	// ErrAuth: a connection did not present the run's secret.
	ErrAuth = errors.New("comm: authentication failed")
)

// NamedTensor is one tensor of a Message.
type NamedTensor struct {
	Name   string
	Tensor *tensor.Dense
}

// Message is what one rank hands to another: a sample id, the next step index and the
// tensors (by convention the latent first, then conditioning the first time a sample
// reaches a stage). Control messages may carry no tensors.
//
// Tag picks the channel: the messages of each (pair of ranks, tag) form their own ordered
// stream. Tag 0 is the default channel that Transport.Recv reads (the engine's hand-offs);
// other tags are read with TaggedTransport.RecvTag (the collectives of a Group use one tag
// per group), so a collective can never consume a hand-off, nor the other way round.
type Message struct {
	Sample  int64
	Step    int32
	Tag     uint16
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

// TaggedTransport is a Transport whose links carry independent channels. Send routes a
// message by its Tag; Recv reads only tag 0; RecvTag reads one tag, with Recv's deadlines
// and errors. Messages of a nonzero tag are queued at the receiver without bound (they never
// hold back the default channel or each other); the default channel keeps its bounded queue
// and back-pressure. On TCP the channels share one connection, so a peer's tagged messages
// written after default-channel messages that do not fit in the receiver's queue wait until
// the receiver reads the default channel (the engine's receiver loop always does).
// Both transports of this package implement it.
type TaggedTransport interface {
	Transport
	RecvTag(ctx context.Context, from int, tag uint16) (Message, error)
}
