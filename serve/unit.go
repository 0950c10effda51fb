package serve

import (
	"fmt"
	"net"
	"slices"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/serve/wire"
)

// A mesh with cfg or cp above 1 gives every pipeline stage of every replica a unit of
// ranks that compute the stage's steps together, as `vdpp generate`'s ranks of that mesh do
// (pipeline.Placement.Configure). The unit's leader (cfg 0, cp 0) is the dispatcher's worker
// of its stage; the coordinator sends every other member a copy of each batch the leader
// gets and takes the leader's reports only. The members find each other through a comm
// rendezvous store the coordinator hosts for the unit once all of them are connected; a
// member's loss ends the unit (every member is restarted, the leader's batch re-runs
// from the latent the coordinator holds) and the unit forms again when they are back.

// unit is one stage's unit of worker ranks (cfg x cp); its mutable fields are guarded by the
// coordinator's mu.
type unit struct {
	ranks   []int // by unit index (comm's rank order of the cfg x cp unit); ranks[0] leads
	cfg, cp int
	conns   map[int]*workerConn // the members' current connections
	pids    map[int]int
	store   *comm.Store // the unit's rendezvous while formed
}

// meshReplicas returns the ranks the dispatcher sees, by replica in stage order: each
// replica's pipeline chain of cfg 0 and cp 0 (every stage's unit leader).
func meshReplicas(m comm.Mesh) [][]int {
	var out [][]int
	for _, chain := range m.Partition(comm.AxisPP) {
		if c := m.Coords(chain[0]); c.CFG == 0 && c.CP == 0 {
			out = append(out, chain)
		}
	}
	return out
}

// meshUnits returns m's units by each of their ranks (nil when cfg and cp are 1): the ranks
// of one pipeline stage of one replica, in the unit's own cfg x cp rank order.
func meshUnits(m comm.Mesh) map[int]*unit {
	if m.CFG*m.CP <= 1 {
		return nil
	}
	um := comm.Mesh{PP: 1, CFG: m.CFG, CP: m.CP, DP: 1}
	out := map[int]*unit{}
	for _, chain := range meshReplicas(m) {
		for _, leader := range chain {
			u := &unit{ranks: make([]int, um.Size()), cfg: m.CFG, cp: m.CP, conns: map[int]*workerConn{}, pids: map[int]int{}}
			lc := m.Coords(leader)
			for cf := range m.CFG {
				for cp := range m.CP {
					r := m.Rank(comm.Coord{PP: lc.PP, CFG: cf, CP: cp, DP: lc.DP})
					u.ranks[um.Rank(comm.Coord{CFG: cf, CP: cp})] = r
					out[r] = u
				}
			}
		}
	}
	return out
}

// joinUnit registers w as rank's connection in its unit u and, once every member is
// connected, forms the unit: a rendezvous store on the worker listener's host, the unit
// message to every member, and the leader joins the dispatcher. It counts w's read loop in
// wg (the caller calls wg.Done when the loop ends); it refuses (false, w closed) once
// Close has begun.
func (c *coordinator) joinUnit(w *workerConn, u *unit, rank, pid int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.d.Closed() {
		w.close()
		return false
	}
	c.wg.Add(1)
	w.rank = rank
	if u.conns[rank] != nil {
		c.breakUnitLocked(u, rank, fmt.Errorf("rank %d connected again", rank))
	}
	u.conns[rank], u.pids[rank] = w, pid
	if len(u.conns) < len(u.ranks) {
		return true
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(c.unitHost, "0"))
	var st *comm.Store
	if err == nil {
		st, err = comm.NewStore(ln, len(u.ranks), c.cfg.Log)
		if err != nil {
			ln.Close()
		}
	}
	if err != nil {
		c.breakUnitLocked(u, rank, fmt.Errorf("unit rendezvous: %w", err))
		return true
	}
	u.store = st
	port := ln.Addr().(*net.TCPAddr).Port
	for i, r := range u.ranks {
		u.conns[r].enqueue(wire.Unit(i, u.cfg, u.cp, port))
	}
	leader := u.conns[u.ranks[0]]
	rc, ok := c.d.Join(u.ranks[0], u.pids[u.ranks[0]], c.cfg.Now())
	if !ok {
		c.breakUnitLocked(u, rank, fmt.Errorf("the dispatcher refused the leader"))
		return true
	}
	leader.rc = rc
	c.conns[rc] = leader
	c.cfg.Log.Info("unit formed", "ranks", u.ranks, "cfg", u.cfg, "cp", u.cp)
	close(c.joined)
	c.joined = make(chan struct{})
	c.flushLocked()
	return true
}

// breakUnitLocked ends u after rank's loss (cause): every member's connection is closed
// and its process killed, so each restarts and the unit forms anew; the leader's read loop
// reports its loss to the dispatcher, which re-runs its batches. The caller holds mu.
func (c *coordinator) breakUnitLocked(u *unit, rank int, cause error) {
	c.cfg.Log.Warn("unit member lost; the unit restarts", "rank", rank, "ranks", u.ranks, "err", cause)
	for _, r := range u.ranks {
		w := u.conns[r]
		if w == nil {
			continue
		}
		w.close()
		if c.onLost != nil {
			c.onLost(r, u.pids[r])
		}
	}
	clear(u.conns)
	if u.store != nil {
		go u.store.Close() // it waits for its connections' goroutines
		u.store = nil
	}
}

// unitMirror returns the connections of the other members of w's unit, which get a copy
// of every batch w gets (none when w leads no unit).
func (c *coordinator) unitMirror(w *workerConn) []*workerConn {
	u := c.units[w.rank]
	if u == nil || u.ranks[0] != w.rank {
		return nil
	}
	var out []*workerConn
	for _, r := range u.ranks[1:] {
		if m := u.conns[r]; m != nil {
			out = append(out, m)
		}
	}
	return out
}

// unitConnected reports whether rank is a member of a formed unit (the caller holds mu).
func (c *coordinator) unitConnectedLocked(rank int) bool {
	u := c.units[rank]
	return u != nil && u.store != nil && u.conns[rank] != nil && !slices.Contains(u.ranks[:1], rank)
}
