package train

import (
	stdcontext "context"
	"time"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/tensor"
)

// Peers is one rank's link to the other ranks of a data-parallel run: the two collectives
// the training loop needs, and a progress report after every step. GroupPeers runs them
// over a comm.Group; a nil Peers is a world of one.
type Peers interface {
	Rank() int
	Size() int
	// AllGather returns every rank's t, in rank order (bit-exact copies).
	AllGather(ctx stdcontext.Context, t *tensor.Dense) ([]*tensor.Dense, error)
	// Barrier returns once every rank has entered it.
	Barrier(ctx stdcontext.Context) error
	// Progress tells the others that this rank finished a step that took work (the TCP
	// transport then waits on it for longer than its slowest step before calling it hung).
	Progress(work time.Duration)
}

// GroupPeers returns Peers running over g, a group of every rank of the run in rank order
// on tr. A rank that dies, stops or is cut off is caught by tr (comm's heartbeats) and ends
// every rank's collectives with an error naming it.
func GroupPeers(tr comm.Transport, g *comm.Group) Peers { return groupPeers{tr, g} }

type groupPeers struct {
	tr comm.Transport
	g  *comm.Group
}

func (p groupPeers) Rank() int { return p.g.Rank() }
func (p groupPeers) Size() int { return p.g.Size() }
func (p groupPeers) AllGather(ctx stdcontext.Context, t *tensor.Dense) ([]*tensor.Dense, error) {
	return comm.AllGather(ctx, p.g, t)
}
func (p groupPeers) Barrier(ctx stdcontext.Context) error { return comm.Barrier(ctx, p.g) }
func (p groupPeers) Progress(work time.Duration)          { comm.ReportProgress(p.tr, work) }

// solo is the world of one process.
type solo struct{}

func (solo) Rank() int { return 0 }
func (solo) Size() int { return 1 }
func (solo) AllGather(_ stdcontext.Context, t *tensor.Dense) ([]*tensor.Dense, error) {
	return []*tensor.Dense{t}, nil
}
func (solo) Barrier(stdcontext.Context) error { return nil }
func (solo) Progress(time.Duration)           {}
