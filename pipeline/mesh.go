package pipeline

import (
	"context"
	"fmt"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/tensor"
)

// Placement is where one rank sits in a pp x cfg x cp x dp mesh run: its pipeline stage and
// neighbours, its data-parallel replica, and the groups its steps exchange over.
type Placement struct {
	Mesh     comm.Mesh
	Coord    comm.Coord
	Groups   comm.MeshGroups
	Stage    int
	PrevRank int // -1 on the first stage
	NextRank int // -1 on the last stage
	Replica  int
	Replicas int
	// Records is true on the one rank per replica that reports finished items: the last
	// stage's cfg 0, cp 0 member (the others hold the same bits).
	Records bool
}

// Place computes rank tr.Rank()'s placement in mesh and opens its groups.
func Place(mesh comm.Mesh, tr comm.Transport) (Placement, error) {
	if tr.Size() != mesh.Size() {
		return Placement{}, fmt.Errorf("pipeline: mesh %v needs %d ranks, the world has %d", mesh, mesh.Size(), tr.Size())
	}
	groups, err := mesh.Groups(tr)
	if err != nil {
		return Placement{}, err
	}
	return placement(mesh, tr.Rank(), groups), nil
}

// PlaceAlone is the placement of a one-rank run (no transport).
func PlaceAlone() Placement {
	return placement(comm.Mesh{PP: 1, CFG: 1, CP: 1, DP: 1}, 0, comm.MeshGroups{})
}

func placement(mesh comm.Mesh, rank int, groups comm.MeshGroups) Placement {
	c := mesh.Coords(rank)
	chain := mesh.PPGroup(rank)
	p := Placement{Mesh: mesh, Coord: c, Groups: groups, Stage: c.PP, PrevRank: -1, NextRank: -1,
		Replica: c.DP, Replicas: mesh.DP}
	if c.PP > 0 {
		p.PrevRank = chain[c.PP-1]
	}
	if c.PP < mesh.PP-1 {
		p.NextRank = chain[c.PP+1]
	}
	p.Records = c.PP == mesh.PP-1 && c.CFG == 0 && c.CP == 0
	return p
}

// DecodeSpread is the spread of a decode shared by n ranks of this rank's pipeline chain:
// its last stage and the n-1 stages before it, the last stage first (none below 2: the
// last stage alone).
func (p Placement) DecodeSpread(n int) Spread {
	chain := p.Mesh.PPGroup(p.Mesh.Rank(p.Coord))
	sp := Spread{Last: chain[len(chain)-1]}
	if n < 2 {
		return sp
	}
	for k := len(chain) - 1; k >= len(chain)-n && k >= 0; k-- {
		sp.Ranks = append(sp.Ranks, chain[k])
	}
	return sp
}

// Configure sets the stepper's CFG and CP splits for this placement (frames is the latent's
// frame count).
func (p Placement) Configure(st *Stepper, frames int) error {
	if p.Mesh.CFG == 2 {
		st.CFG = cfgPair{p.Groups.CFG}
	} else if p.Mesh.CFG > 2 {
		return fmt.Errorf("pipeline: --cfg %d: classifier-free guidance has two halves (use 1 or 2)", p.Mesh.CFG)
	}
	if p.Mesh.CP > 1 {
		ranges, err := FrameRanges(frames, p.Mesh.CP)
		if err != nil {
			return err
		}
		r := ranges[p.Coord.CP]
		g := p.Groups.CP
		st.CP = &FrameSplit{
			Part: modelFramePart(r, frames, g),
			Gather: func(ctx context.Context, mine *tensor.Dense) ([]*tensor.Dense, error) {
				return comm.AllGather(ctx, g, mine)
			},
		}
		if p.Mesh.CFG == 2 {
			jg := p.Groups.Joint
			if jg == nil {
				return fmt.Errorf("pipeline: mesh %v: no cfg x cp group (use Place)", p.Mesh)
			}
			st.Joint = func(ctx context.Context, mine *tensor.Dense) ([]*tensor.Dense, error) {
				return comm.AllGather(ctx, jg, mine)
			}
		}
	}
	return nil
}

// cfgPair exchanges CFG halves over a two-member group.
type cfgPair struct{ g *comm.Group }

func (c cfgPair) Index() int { return c.g.Rank() }

func (c cfgPair) Exchange(ctx context.Context, mine *tensor.Dense) (*tensor.Dense, *tensor.Dense, error) {
	parts, err := comm.AllGather(ctx, c.g, mine)
	if err != nil {
		return nil, nil, err
	}
	return parts[0], parts[1], nil
}
