package serve

import (
	"reflect"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/comm"
)

// resolveMesh: a Config without a mesh is a pipeline of NProc stages; a mesh is checked
// against NProc and against what the workers run (cfg at most 2).
func TestResolveMesh(t *testing.T) {
	for _, c := range []struct {
		name    string
		nproc   int
		mesh    comm.Mesh
		want    comm.Mesh
		wantErr string
	}{
		{name: "nproc alone", nproc: 3, want: comm.Mesh{PP: 3, CFG: 1, CP: 1, DP: 1}},
		{name: "mesh alone", mesh: comm.Mesh{PP: 2, CFG: 1, CP: 1, DP: 2}, want: comm.Mesh{PP: 2, CFG: 1, CP: 1, DP: 2}},
		{name: "mesh and its size", nproc: 4, mesh: comm.Mesh{PP: 2, CFG: 1, CP: 1, DP: 2}, want: comm.Mesh{PP: 2, CFG: 1, CP: 1, DP: 2}},
		{name: "no ranks", wantErr: "--nproc 0"},
		{name: "size mismatch", nproc: 3, mesh: comm.Mesh{PP: 2, CFG: 1, CP: 1, DP: 2}, wantErr: "3 worker ranks, but the mesh pp=2 cfg=1 cp=1 dp=2 has 4"},
		{name: "cfg pairs", nproc: 8, mesh: comm.Mesh{PP: 2, CFG: 2, CP: 1, DP: 2}, want: comm.Mesh{PP: 2, CFG: 2, CP: 1, DP: 2}},
		{name: "cfg 3 refused", mesh: comm.Mesh{PP: 1, CFG: 3, CP: 1, DP: 1}, wantErr: "--cfg 3: classifier-free guidance has two halves"},
		{name: "cp units", mesh: comm.Mesh{PP: 1, CFG: 1, CP: 2, DP: 2}, want: comm.Mesh{PP: 1, CFG: 1, CP: 2, DP: 2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := resolveMesh(c.nproc, c.mesh)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("resolveMesh(%d, %v) = %v, %v; want an error with %q", c.nproc, c.mesh, got, err, c.wantErr)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("resolveMesh(%d, %v) = %v, %v; want %v", c.nproc, c.mesh, got, err, c.want)
			}
		})
	}
}

// The dispatcher sees each replica's chain of unit leaders (cfg 0), and each leader's unit
// holds its stage's ranks in the unit's own rank order (cfg index), leader first.
func TestMeshUnits(t *testing.T) {
	for _, c := range []struct {
		name     string
		mesh     comm.Mesh
		replicas [][]int
		units    map[int][]int // by rank
	}{
		{name: "pp x dp, no units", mesh: comm.Mesh{PP: 2, CFG: 1, CP: 1, DP: 2}, replicas: [][]int{{0, 1}, {2, 3}}},
		{name: "cfg 2", mesh: comm.Mesh{PP: 1, CFG: 2, CP: 1, DP: 1}, replicas: [][]int{{0}},
			units: map[int][]int{0: {0, 1}, 1: {0, 1}}},
		{name: "cfg 2 x cp 2", mesh: comm.Mesh{PP: 1, CFG: 2, CP: 2, DP: 1}, replicas: [][]int{{0}},
			units: map[int][]int{0: {0, 1, 2, 3}, 1: {0, 1, 2, 3}, 2: {0, 1, 2, 3}, 3: {0, 1, 2, 3}}},
		{name: "pp 2 x cfg 2 x dp 2", mesh: comm.Mesh{PP: 2, CFG: 2, CP: 1, DP: 2}, replicas: [][]int{{0, 2}, {4, 6}},
			units: map[int][]int{0: {0, 1}, 1: {0, 1}, 2: {2, 3}, 3: {2, 3}, 4: {4, 5}, 5: {4, 5}, 6: {6, 7}, 7: {6, 7}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := meshReplicas(c.mesh); !reflect.DeepEqual(got, c.replicas) {
				t.Fatalf("replicas %v, want %v", got, c.replicas)
			}
			units := meshUnits(c.mesh)
			if len(units) != len(c.units) {
				t.Fatalf("%d ranks in units, want %d", len(units), len(c.units))
			}
			for r, want := range c.units {
				if u := units[r]; u == nil || !reflect.DeepEqual(u.ranks, want) || u.cfg != c.mesh.CFG {
					t.Fatalf("rank %d's unit %+v, want ranks %v", r, u, want)
				}
			}
		})
	}
}
