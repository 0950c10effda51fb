package comm

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestNewMeshRejects(t *testing.T) {
	tests := []struct {
		pp, cfg, cp, dp, world int
		want                   string
	}{
		{2, 2, 1, 1, 3, "comm: bad mesh: pp 2 x cfg 2 x cp 1 x dp 1 does not equal the world size 3"},
		{2, 1, 1, 1, 4, "comm: bad mesh: pp 2 x cfg 1 x cp 1 x dp 1 does not equal the world size 4"},
		{1, 1, 1, 8, 4, "comm: bad mesh: pp 1 x cfg 1 x cp 1 x dp 8 does not equal the world size 4"},
		{3, 1, 2, 1, 4, "comm: bad mesh: pp 3 x cfg 1 x cp 2 x dp 1 does not equal the world size 4"},
		{1, 0, 1, 1, 1, "comm: bad mesh: --cfg 0: every degree must be at least 1 (pp 1, cfg 0, cp 1, dp 1, world 1)"},
		{1, 1, -2, 1, 1, "comm: bad mesh: --cp -2: every degree must be at least 1 (pp 1, cfg 1, cp -2, dp 1, world 1)"},
		{1, 1, 1, 1, 0, "comm: bad mesh: pp 1 x cfg 1 x cp 1 x dp 1 does not equal the world size 0"},
		{1 << 40, 1 << 40, 1, 1, 1 << 20, "comm: bad mesh: pp 1099511627776 x cfg 1099511627776 x cp 1 x dp 1 does not equal the world size 1048576"},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			_, err := NewMesh(tc.pp, tc.cfg, tc.cp, tc.dp, tc.world)
			if !errors.Is(err, ErrMesh) || err.Error() != tc.want {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestMeshLayout(t *testing.T) {
	m, err := NewMesh(2, 2, 2, 1, 8)
	if err != nil {
		t.Fatal(err)
	}
	// cp innermost, then cfg, then pp, dp outermost.
	tests := []struct {
		rank        int
		c           Coord
		pp, cfg, cp []int
		dp          []int
	}{
		{0, Coord{PP: 0, CFG: 0, CP: 0}, []int{0, 4}, []int{0, 2}, []int{0, 1}, []int{0}},
		{1, Coord{PP: 0, CFG: 0, CP: 1}, []int{1, 5}, []int{1, 3}, []int{0, 1}, []int{1}},
		{2, Coord{PP: 0, CFG: 1, CP: 0}, []int{2, 6}, []int{0, 2}, []int{2, 3}, []int{2}},
		{5, Coord{PP: 1, CFG: 0, CP: 1}, []int{1, 5}, []int{5, 7}, []int{4, 5}, []int{5}},
		{7, Coord{PP: 1, CFG: 1, CP: 1}, []int{3, 7}, []int{5, 7}, []int{6, 7}, []int{7}},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.rank), func(t *testing.T) {
			if got := m.Coords(tc.rank); got != tc.c {
				t.Fatalf("Coords = %+v, want %+v", got, tc.c)
			}
			if got := m.Rank(tc.c); got != tc.rank {
				t.Fatalf("Rank = %d", got)
			}
			for _, g := range []struct {
				name      string
				got, want []int
			}{{"pp", m.PPGroup(tc.rank), tc.pp}, {"cfg", m.CFGGroup(tc.rank), tc.cfg}, {"cp", m.CPGroup(tc.rank), tc.cp}, {"dp", m.DPGroup(tc.rank), tc.dp}} {
				if !slices.Equal(g.got, g.want) {
					t.Errorf("%s group = %v, want %v", g.name, g.got, g.want)
				}
			}
		})
	}
	dp, _ := NewMesh(2, 1, 1, 3, 6)
	if got := dp.DPGroup(3); !slices.Equal(got, []int{1, 3, 5}) {
		t.Fatalf("dp group of rank 3 in %v = %v", dp, got)
	}
	if got := dp.PPGroup(3); !slices.Equal(got, []int{2, 3}) {
		t.Fatalf("pp group of rank 3 in %v = %v", dp, got)
	}
}

// TestMeshPartitions checks, for many meshes, that Coords and Rank are inverse, that each
// axis's groups partition the world (every rank exactly once), that a group's members
// differ only on its axis and are ordered by it, and that groups of different axes share
// no pair of ranks.
func TestMeshPartitions(t *testing.T) {
	for pp := 1; pp <= 3; pp++ {
		for cfg := 1; cfg <= 2; cfg++ {
			for cp := 1; cp <= 3; cp++ {
				for dp := 1; dp <= 2; dp++ {
					world := pp * cfg * cp * dp
					m, err := NewMesh(pp, cfg, cp, dp, world)
					if err != nil {
						t.Fatal(err)
					}
					t.Run(strings.ReplaceAll(m.String(), " ", ","), func(t *testing.T) { checkMesh(t, m) })
				}
			}
		}
	}
}

func checkMesh(t *testing.T, m Mesh) {
	seen := map[Coord]bool{}
	for r := range m.Size() {
		c := m.Coords(r)
		if seen[c] || m.Rank(c) != r {
			t.Fatalf("rank %d: coords %+v (seen %v), back to rank %d", r, c, seen[c], m.Rank(c))
		}
		seen[c] = true
	}
	pairAxis := map[[2]int]Axis{}
	for _, a := range Axes {
		count := make([]int, m.Size())
		part := m.Partition(a)
		if len(part) != m.Size()/m.Degree(a) {
			t.Fatalf("%s: %d groups", a, len(part))
		}
		for _, g := range part {
			if len(g) != m.Degree(a) {
				t.Fatalf("%s group %v: size %d", a, g, len(g))
			}
			c0 := m.Coords(g[0])
			for i, r := range g {
				count[r]++
				if c := m.Coords(r); c.Get(a) != i || c.With(a, 0) != c0.With(a, 0) {
					t.Fatalf("%s group %v: member %d (rank %d) at %+v", a, g, i, r, c)
				}
				if !slices.Equal(m.Group(a, r), g) {
					t.Fatalf("%s group of rank %d = %v, want %v", a, r, m.Group(a, r), g)
				}
				for _, s := range g[i+1:] {
					if b, ok := pairAxis[[2]int{r, s}]; ok {
						t.Fatalf("pair %d-%d in a %s group and a %s group", r, s, b, a)
					}
					pairAxis[[2]int{r, s}] = a
				}
			}
		}
		for r, n := range count {
			if n != 1 {
				t.Fatalf("%s: rank %d appears %d times", a, r, n)
			}
		}
	}
}

func TestMeshGroupsNamesAndErrors(t *testing.T) {
	m, _ := NewMesh(2, 2, 1, 1, 4)
	ts := NewLocal(4, Options{})
	gs, err := m.Groups(ts[3])
	if err != nil {
		t.Fatal(err)
	}
	if gs.PP.String() != "group pp [1 3]" || gs.CFG.String() != "group cfg [2 3]" || gs.CP.String() != "group cp [3]" || gs.DP.String() != "group dp [3]" {
		t.Fatalf("groups %v %v %v %v", gs.PP, gs.CFG, gs.CP, gs.DP)
	}
	if gs.PP.Rank() != 1 || gs.CFG.Rank() != 1 || gs.CP.Rank() != 0 {
		t.Fatalf("member indices %d %d %d", gs.PP.Rank(), gs.CFG.Rank(), gs.CP.Rank())
	}
	if _, err := m.Groups(NewLocal(2, Options{})[0]); !errors.Is(err, ErrMesh) {
		t.Fatalf("mesh of 4 on a world of 2: %v", err)
	}
}
