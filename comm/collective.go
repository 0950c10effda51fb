package comm

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/vdpp/vdpp/tensor"
)

// ErrCollective: the members of a group disagree about a collective (a message of another
// collective, call or group arrived, a part count or shape that must match does not), or a
// collective was called with invalid arguments.
var ErrCollective = errors.New("comm: collective mismatch")

// Collective names, as they appear in errors and on the wire (the name of the one tensor of
// every collective message).
const (
	opAllGather = "all-gather"
	opAllToAll  = "all-to-all"
	opBroadcast = "broadcast"
	opBarrier   = "barrier"
	opAllReduce = "all-reduce-sum"
)

// The collectives are built only on TaggedTransport.Send and RecvTag: a member first sends
// everything it has to send (sends are queued, so they do not wait for the receivers), then
// receives from the members it expects, in member order. They start no goroutines. A send
// that fails does not stop the sends to the other members, so every other member learns of
// a dead member from its own link to it, promptly, rather than by waiting on a survivor.
// Every receive has the transport's deadline (the sooner of ctx's and RecvTimeout), and an
// error names the local rank, the collective, the group and the peer:
//
//	rank 3: all-gather in group [2 3]: recv from rank 2: comm: timeout after 60s
//
// Results are bit-exact copies of what members sent; the entry of the local member is a
// copy of its own input.

// AllGather returns every member's t, in member order. Shapes may differ between members.
func AllGather(ctx context.Context, g *Group, t *tensor.Dense) ([]*tensor.Dense, error) {
	if t == nil {
		return nil, g.argError(opAllGather, "nil tensor")
	}
	return g.exchange(ctx, opAllGather,
		func(int) *tensor.Dense { return t },
		func(int) bool { return true })
}

// AllToAll sends parts[i] to member i and returns, at index i, the part member i sent to
// this member. len(parts) must be g.Size(); shapes may differ.
func AllToAll(ctx context.Context, g *Group, parts []*tensor.Dense) ([]*tensor.Dense, error) {
	if len(parts) != g.Size() {
		return nil, g.argError(opAllToAll, fmt.Sprintf("%d parts for %d members", len(parts), g.Size()))
	}
	for i, p := range parts {
		if p == nil {
			return nil, g.argError(opAllToAll, fmt.Sprintf("part %d is nil", i))
		}
	}
	return g.exchange(ctx, opAllToAll,
		func(j int) *tensor.Dense { return parts[j] },
		func(int) bool { return true })
}

// Broadcast returns root's t on every member (root is a member index). Only the root's t is
// read; the others may pass nil. The root returns once its sends are queued: it does not
// wait for the others (follow with a Barrier where that matters).
func Broadcast(ctx context.Context, g *Group, root int, t *tensor.Dense) (*tensor.Dense, error) {
	switch {
	case root < 0 || root >= g.Size():
		return nil, g.argError(opBroadcast, fmt.Sprintf("root %d of %d members", root, g.Size()))
	case g.me == root && t == nil:
		return nil, g.argError(opBroadcast, "nil tensor at the root")
	}
	out, err := g.exchange(ctx, opBroadcast,
		func(int) *tensor.Dense {
			if g.me == root {
				return t
			}
			return nil
		},
		func(j int) bool { return j == root })
	if err != nil {
		return nil, err
	}
	return out[root], nil
}

// emptyTensor is the payload of a barrier message.
var emptyTensor = &tensor.Dense{Shape: []int{0}, Data: []float32{}}

// Barrier returns once every member has entered it.
func Barrier(ctx context.Context, g *Group) error {
	_, err := g.exchange(ctx, opBarrier,
		func(int) *tensor.Dense { return emptyTensor },
		func(int) bool { return true })
	return err
}

// AllReduceSum returns the element-wise sum of every member's t (all of one shape). The sum
// is taken in member order, ((t0 + t1) + t2) + ..., on every member, so every member gets
// the same bits whatever the timing.
func AllReduceSum(ctx context.Context, g *Group, t *tensor.Dense) (*tensor.Dense, error) {
	if t == nil {
		return nil, g.argError(opAllReduce, "nil tensor")
	}
	parts, err := g.exchange(ctx, opAllReduce,
		func(int) *tensor.Dense { return t },
		func(int) bool { return true })
	if err != nil {
		return nil, err
	}
	sum := parts[0]
	for j, p := range parts[1:] {
		if !tensor.SameShape(p, sum) || len(p.Data) != len(sum.Data) {
			return nil, g.argError(opAllReduce, fmt.Sprintf("member %d (rank %d) has shape %v, member 0 has %v", j+1, g.Ranks[j+1], p.Shape, sum.Shape))
		}
	}
	for _, p := range parts[1:] {
		for i, v := range p.Data {
			sum.Data[i] += v
		}
	}
	return sum, nil
}

// exchange runs one collective: it sends send(j) to every member j for which it is not
// nil, then receives from every member j with recv(j), and returns what each sent (a copy
// of send(me) at the local index when recv(me)).
func (g *Group) exchange(ctx context.Context, op string, send func(j int) *tensor.Dense, recv func(j int) bool) ([]*tensor.Dense, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.broken != nil {
		return nil, &collectiveError{msg: g.prefix(op) + ": group unusable after an earlier failure: " + g.broken.Error(), err: g.broken}
	}
	seq := g.seq
	g.seq++
	out := make([]*tensor.Dense, g.Size())
	var first error
	for j := range g.Ranks {
		if j == g.me {
			continue
		}
		t := send(j)
		if t == nil {
			continue
		}
		m := Message{Sample: g.id, Step: seq, Tag: g.tag, Tensors: []NamedTensor{{Name: op, Tensor: t}}}
		if err := g.tr.Send(ctx, g.Ranks[j], m); err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return nil, g.fail(op, first)
	}
	for j := range g.Ranks {
		if !recv(j) {
			continue
		}
		if j == g.me {
			out[j] = cloneTensor(send(j))
			continue
		}
		m, err := g.tr.RecvTag(ctx, g.Ranks[j], g.tag)
		if err != nil {
			return nil, g.fail(op, err)
		}
		if err := g.check(m, op, seq); err != nil {
			return nil, g.fail(op, fmt.Errorf("rank %d: recv from rank %d: %w", g.Ranks[g.me], g.Ranks[j], err))
		}
		out[j] = m.Tensors[0].Tensor
	}
	return out, nil
}

// check verifies that m is message seq of collective op in this group.
func (g *Group) check(m Message, op string, seq int32) error {
	switch {
	case m.Sample != g.id:
		return fmt.Errorf("%w: got a message of another group (id %#x), want %s #%d", ErrCollective, uint64(m.Sample), op, seq)
	case len(m.Tensors) != 1:
		return fmt.Errorf("%w: got a message of %d tensors, want %s #%d", ErrCollective, len(m.Tensors), op, seq)
	case m.Tensors[0].Name != op || m.Step != seq:
		return fmt.Errorf("%w: got %s #%d, want %s #%d", ErrCollective, m.Tensors[0].Name, m.Step, op, seq)
	}
	return nil
}

// prefix is "rank 3: all-gather in group [2 3]".
func (g *Group) prefix(op string) string {
	return fmt.Sprintf("rank %d: %s in %v", g.Ranks[g.me], op, g)
}

// fail marks the group unusable and returns err under the collective's prefix. err comes
// from the transport, which already names the local rank; that part is not repeated.
func (g *Group) fail(op string, err error) error {
	msg := strings.TrimPrefix(err.Error(), fmt.Sprintf("rank %d: ", g.Ranks[g.me]))
	e := &collectiveError{msg: g.prefix(op) + ": " + msg, err: err}
	g.broken = e
	return e
}

// argError reports invalid arguments; nothing was sent and the group stays usable.
func (g *Group) argError(op, what string) error {
	return fmt.Errorf("%s: %w: %s", g.prefix(op), ErrCollective, what)
}

// collectiveError is a collective's failure: its text names the collective and the group,
// and it unwraps to the transport's error (ErrTimeout, ErrPeerGone, ...).
type collectiveError struct {
	msg string
	err error
}

func (e *collectiveError) Error() string { return e.msg }
func (e *collectiveError) Unwrap() error { return e.err }
