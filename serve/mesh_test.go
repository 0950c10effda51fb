package serve

import (
	"strings"
	"testing"

	"github.com/vdpp/vdpp/comm"
)

// resolveMesh: a Config without a mesh is a pipeline of NProc stages; a mesh is checked
// against NProc and against what the workers run (pp x dp).
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
		{name: "cfg refused", mesh: comm.Mesh{PP: 1, CFG: 2, CP: 1, DP: 1}, wantErr: "serve's workers run pp x dp meshes"},
		{name: "cp refused", mesh: comm.Mesh{PP: 1, CFG: 1, CP: 2, DP: 2}, wantErr: "serve's workers run pp x dp meshes"},
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
