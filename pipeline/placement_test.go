package pipeline

import (
	"fmt"
	"testing"

	"github.com/vdpp/vdpp/comm"
)

func TestPlacementDecodeSpread(t *testing.T) {
	mesh := comm.Mesh{PP: 3, CFG: 1, CP: 1, DP: 2}
	for rank, want := range map[int]Spread{
		0: {Last: mesh.PPGroup(0)[2], Ranks: []int{mesh.PPGroup(0)[2], mesh.PPGroup(0)[1]}},
		1: {Last: mesh.PPGroup(1)[2], Ranks: []int{mesh.PPGroup(1)[2], mesh.PPGroup(1)[1]}},
	} {
		p := placement(mesh, rank, comm.MeshGroups{})
		if got := p.DecodeSpread(2); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("rank %d: %+v, want %+v", rank, got, want)
		}
		if got := p.DecodeSpread(1); len(got.Ranks) != 0 || got.Last != want.Last {
			t.Errorf("rank %d, one decode rank: %+v", rank, got)
		}
	}
}
