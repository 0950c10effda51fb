package comm

import (
	"errors"
	"fmt"
)

// ErrMesh: the parallel degrees do not describe the world (a product that differs from
// the world size, or a degree below 1).
var ErrMesh = errors.New("comm: bad mesh")

// Mesh is the layout of a world as pp x cfg x cp x dp: PP pipeline stages, CFG guidance
// halves, CP context (frame) shards and DP data-parallel replicas.
//
// Rank layout: cp is innermost, then cfg, then pp, and dp is outermost:
//
//	rank = ((dp*PP + pp)*CFG + cfg)*CP + cp
//
// so the ranks of one context group are adjacent, one replica (dp fixed) is a contiguous
// block of PP*CFG*CP ranks, and rank 0 is the first stage of every group it belongs to.
type Mesh struct {
	PP, CFG, CP, DP int
}

// Coord is a rank's position in a Mesh, one index per axis.
type Coord struct {
	PP, CFG, CP, DP int
}

// Axis names one dimension of a Mesh.
type Axis int

// The axes of a Mesh.
const (
	AxisPP Axis = iota
	AxisCFG
	AxisCP
	AxisDP
)

// Axes lists every axis in a fixed order.
var Axes = [...]Axis{AxisPP, AxisCFG, AxisCP, AxisDP}

// String returns the axis's flag name: "pp", "cfg", "cp" or "dp".
func (a Axis) String() string {
	switch a {
	case AxisPP:
		return "pp"
	case AxisCFG:
		return "cfg"
	case AxisCP:
		return "cp"
	case AxisDP:
		return "dp"
	}
	return fmt.Sprintf("axis(%d)", int(a))
}

// NewMesh returns the mesh pp x cfg x cp x dp of a world of the given size. Every degree
// must be at least 1 and their product must equal world; otherwise the error wraps ErrMesh
// and names all four degrees and the world.
func NewMesh(pp, cfg, cp, dp, world int) (Mesh, error) {
	m := Mesh{PP: pp, CFG: cfg, CP: cp, DP: dp}
	for _, a := range Axes {
		if m.Degree(a) < 1 {
			return Mesh{}, fmt.Errorf("%w: --%s %d: every degree must be at least 1 (pp %d, cfg %d, cp %d, dp %d, world %d)",
				ErrMesh, a, m.Degree(a), pp, cfg, cp, dp, world)
		}
	}
	// Each degree is >= 1 here; compare by division so a huge product cannot overflow.
	if rest := world; rest < 1 || rest%pp != 0 || (rest/pp)%cfg != 0 || (rest/pp/cfg)%cp != 0 || rest/pp/cfg/cp != dp {
		return Mesh{}, fmt.Errorf("%w: pp %d x cfg %d x cp %d x dp %d does not equal the world size %d",
			ErrMesh, pp, cfg, cp, dp, world)
	}
	return m, nil
}

// Size returns the number of ranks, PP*CFG*CP*DP.
func (m Mesh) Size() int { return m.PP * m.CFG * m.CP * m.DP }

// String returns "pp=2 cfg=2 cp=1 dp=1".
func (m Mesh) String() string {
	return fmt.Sprintf("pp=%d cfg=%d cp=%d dp=%d", m.PP, m.CFG, m.CP, m.DP)
}

// Degree returns the size of axis a.
func (m Mesh) Degree(a Axis) int {
	switch a {
	case AxisPP:
		return m.PP
	case AxisCFG:
		return m.CFG
	case AxisCP:
		return m.CP
	case AxisDP:
		return m.DP
	}
	panic(fmt.Sprintf("comm: unknown mesh axis %d", int(a)))
}

// Coords returns the position of rank. It panics when rank is outside the mesh.
func (m Mesh) Coords(rank int) Coord {
	if rank < 0 || rank >= m.Size() {
		panic(fmt.Sprintf("comm: rank %d outside mesh %v of %d ranks", rank, m, m.Size()))
	}
	var c Coord
	c.CP, rank = rank%m.CP, rank/m.CP
	c.CFG, rank = rank%m.CFG, rank/m.CFG
	c.PP, c.DP = rank%m.PP, rank/m.PP
	return c
}

// Rank returns the rank at c. It panics when a coordinate is out of range.
func (m Mesh) Rank(c Coord) int {
	if c.PP < 0 || c.PP >= m.PP || c.CFG < 0 || c.CFG >= m.CFG || c.CP < 0 || c.CP >= m.CP || c.DP < 0 || c.DP >= m.DP {
		panic(fmt.Sprintf("comm: coordinate %+v outside mesh %v", c, m))
	}
	return ((c.DP*m.PP+c.PP)*m.CFG+c.CFG)*m.CP + c.CP
}

// Get returns the coordinate on axis a.
func (c Coord) Get(a Axis) int {
	switch a {
	case AxisPP:
		return c.PP
	case AxisCFG:
		return c.CFG
	case AxisCP:
		return c.CP
	case AxisDP:
		return c.DP
	}
	panic(fmt.Sprintf("comm: unknown mesh axis %d", int(a)))
}

// With returns c with the coordinate on axis a set to v.
func (c Coord) With(a Axis, v int) Coord {
	switch a {
	case AxisPP:
		c.PP = v
	case AxisCFG:
		c.CFG = v
	case AxisCP:
		c.CP = v
	case AxisDP:
		c.DP = v
	default:
		panic(fmt.Sprintf("comm: unknown mesh axis %d", int(a)))
	}
	return c
}

// Group returns the ranks that share every coordinate of rank except the one on axis a,
// ordered by that coordinate: element i is the member whose a-coordinate is i, so rank's
// own index in the group is Coords(rank).Get(a).
func (m Mesh) Group(a Axis, rank int) []int {
	c := m.Coords(rank)
	out := make([]int, m.Degree(a))
	for i := range out {
		out[i] = m.Rank(c.With(a, i))
	}
	return out
}

// Partition returns every group of axis a, ordered by their first rank; together they hold
// each rank exactly once.
func (m Mesh) Partition(a Axis) [][]int {
	var out [][]int
	for r := range m.Size() {
		if m.Coords(r).Get(a) == 0 {
			out = append(out, m.Group(a, r))
		}
	}
	return out
}

// PPGroup returns rank's pipeline chain: the ranks with its cfg, cp and dp coordinates,
// ordered by pipeline stage.
func (m Mesh) PPGroup(rank int) []int { return m.Group(AxisPP, rank) }

// CFGGroup returns the ranks that hold the other guidance halves of rank's work, ordered
// by cfg index (0: unconditional, 1: conditional, by the engine's convention).
func (m Mesh) CFGGroup(rank int) []int { return m.Group(AxisCFG, rank) }

// CPGroup returns the ranks that share rank's sample by frames, ordered by cp index.
func (m Mesh) CPGroup(rank int) []int { return m.Group(AxisCP, rank) }

// DPGroup returns the replicas of rank's position, ordered by dp index.
func (m Mesh) DPGroup(rank int) []int { return m.Group(AxisDP, rank) }
