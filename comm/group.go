package comm

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"

	"github.com/vdpp/vdpp/tensor"
)

// ErrGroup: a process group cannot be formed (no members, a repeated or out-of-range rank,
// the local rank not a member, or a transport without tagged channels).
var ErrGroup = errors.New("comm: bad group")

// Group is a set of ranks that run collectives together, bound to this rank's transport.
// Member i is global rank Ranks[i]; every member must build the group with the same ranks
// in the same order (and the same name), and call its collectives in the same order.
//
// A group's messages travel on their own channel tag, derived from its name and ranks, so
// they never mix with the engine's hand-offs (tag 0) or with other groups' traffic. Two
// live groups of the same ranks need different names (NewNamedGroup). Every collective
// message also carries the group's 64-bit id, the call's sequence number and the
// collective's name; a member that receives anything else fails with ErrCollective instead
// of using it. After a collective fails the group is unusable: later calls fail at once.
type Group struct {
	// Ranks are the members' global ranks, in member order. Do not modify.
	Ranks []int
	// Name labels the group in errors ("cfg"); it is part of the channel derivation.
	Name string

	tr  TaggedTransport
	me  int
	tag uint16
	id  int64

	mu     sync.Mutex // one collective at a time
	seq    int32
	broken error
}

// NewGroup returns the group of ranks (in that order) on tr, named by its ranks only.
func NewGroup(tr Transport, ranks []int) (*Group, error) { return NewNamedGroup(tr, "", ranks) }

// NewNamedGroup returns the group of ranks on tr under name; the name salts the group's
// channel, so groups of the same ranks but different names are independent.
func NewNamedGroup(tr Transport, name string, ranks []int) (*Group, error) {
	fail := func(format string, args ...any) (*Group, error) {
		return nil, fmt.Errorf("rank %d: group %s%v: %w: "+format, append([]any{tr.Rank(), namePrefix(name), ranks, ErrGroup}, args...)...)
	}
	tt, ok := tr.(TaggedTransport)
	if !ok {
		return fail("transport %T has no tagged channels", tr)
	}
	if len(ranks) == 0 {
		return fail("no members")
	}
	me := -1
	seen := make(map[int]bool, len(ranks))
	for i, r := range ranks {
		switch {
		case r < 0 || r >= tr.Size():
			return fail("rank %d outside the world of %d", r, tr.Size())
		case seen[r]:
			return fail("rank %d appears twice", r)
		}
		seen[r] = true
		if r == tr.Rank() {
			me = i
		}
	}
	if me < 0 {
		return fail("rank %d is not a member", tr.Rank())
	}
	id, tag := groupID(name, ranks)
	return &Group{Ranks: slices.Clone(ranks), Name: name, tr: tt, me: me, tag: tag, id: id}, nil
}

// groupID hashes the name and the member list (FNV-1a 64) into the id every collective
// message carries, and folds it into a nonzero channel tag.
func groupID(name string, ranks []int) (int64, uint16) {
	h := fnv.New64a()
	h.Write([]byte(name))
	h.Write([]byte{0})
	var b [8]byte
	for _, r := range ranks {
		for i := range b {
			b[i] = byte(uint64(r) >> (8 * i))
		}
		h.Write(b[:])
	}
	id := h.Sum64()
	tag := uint16(id) ^ uint16(id>>16) ^ uint16(id>>32) ^ uint16(id>>48)
	if tag == 0 {
		tag = 1
	}
	return int64(id), tag
}

func namePrefix(name string) string {
	if name == "" {
		return ""
	}
	return name + " "
}

// Rank returns this rank's index in the group.
func (g *Group) Rank() int { return g.me }

// Size returns the number of members.
func (g *Group) Size() int { return len(g.Ranks) }

// Global returns the global rank of member i.
func (g *Group) Global(i int) int { return g.Ranks[i] }

// Tag returns the channel tag the group's messages use.
func (g *Group) Tag() uint16 { return g.tag }

// String returns "group [2 3]", or "group cfg [2 3]" for a named group.
func (g *Group) String() string { return fmt.Sprintf("group %s%v", namePrefix(g.Name), g.Ranks) }

// MeshGroups are the four groups of one rank in a Mesh, named "pp", "cfg", "cp" and "dp".
// Groups of different axes never share a pair of ranks, so they may run collectives at the
// same time as each other and as the pipeline hand-offs.
type MeshGroups struct {
	PP, CFG, CP, DP *Group
	// Joint is the cfg x cp group (named "cfgcp": the ranks with this rank's pp and dp
	// coordinates, in (cfg, cp) order), set when both degrees exceed 1, so a step can gather
	// frames and CFG halves in one collective. It shares pairs with CFG and CP; its own tag
	// keeps the traffic apart.
	Joint *Group
}

// Groups builds the local rank's groups of m on tr; tr's world must be m's.
func (m Mesh) Groups(tr Transport) (MeshGroups, error) {
	if tr.Size() != m.Size() {
		return MeshGroups{}, fmt.Errorf("rank %d: mesh %v: %w: %d ranks, but the transport's world has %d", tr.Rank(), m, ErrMesh, m.Size(), tr.Size())
	}
	var out MeshGroups
	for _, a := range Axes {
		g, err := NewNamedGroup(tr, a.String(), m.Group(a, tr.Rank()))
		if err != nil {
			return MeshGroups{}, err
		}
		switch a {
		case AxisPP:
			out.PP = g
		case AxisCFG:
			out.CFG = g
		case AxisCP:
			out.CP = g
		case AxisDP:
			out.DP = g
		}
	}
	if m.CFG > 1 && m.CP > 1 {
		c := m.Coords(tr.Rank())
		var ranks []int
		for cfg := 0; cfg < m.CFG; cfg++ {
			for cp := 0; cp < m.CP; cp++ {
				ranks = append(ranks, m.Rank(Coord{PP: c.PP, CFG: cfg, CP: cp, DP: c.DP}))
			}
		}
		g, err := NewNamedGroup(tr, "cfgcp", ranks)
		if err != nil {
			return MeshGroups{}, err
		}
		out.Joint = g
	}
	return out, nil
}

// Index is Rank under the name model.FrameComm uses, so a *Group is a FrameComm as it is.
func (g *Group) Index() int { return g.Rank() }

// AllGather is the package's AllGather over g.
func (g *Group) AllGather(ctx context.Context, t *tensor.Dense) ([]*tensor.Dense, error) {
	return AllGather(ctx, g, t)
}

// AllToAll is the package's AllToAll over g.
func (g *Group) AllToAll(ctx context.Context, parts []*tensor.Dense) ([]*tensor.Dense, error) {
	return AllToAll(ctx, g, parts)
}
