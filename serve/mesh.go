package serve

import (
	"fmt"

	"github.com/vdpp/vdpp/comm"
)

// The workers of a server are laid out as a comm.Mesh with comm's rank order: DP
// replicas, each a pipeline of PP stages, each stage one worker rank, or a unit of CFG
// ranks (unit.go) whose leader the dispatcher sees, so the dispatcher sees one worker per
// stage of each replica. cp units are refused (Server.New).

// resolveMesh returns the workers' mesh of Config's NProc and Mesh: Mesh when set (NProc,
// when also set, must be its size; cp above 1 is refused), else a pipeline of NProc
// stages.
func resolveMesh(nproc int, m comm.Mesh) (comm.Mesh, error) {
	if m == (comm.Mesh{}) {
		if nproc < 1 {
			return m, fmt.Errorf("serve: --nproc %d: need at least 1 worker rank", nproc)
		}
		return comm.Mesh{PP: nproc, CFG: 1, CP: 1, DP: 1}, nil
	}
	mesh, err := comm.NewMesh(m.PP, m.CFG, m.CP, m.DP, m.Size())
	if err != nil {
		return m, fmt.Errorf("serve: %w", err)
	}
	if nproc != 0 && nproc != mesh.Size() {
		return m, fmt.Errorf("serve: %d worker ranks, but the mesh %v has %d", nproc, mesh, mesh.Size())
	}
	if mesh.CFG > 2 {
		return m, fmt.Errorf("serve: --cfg %d: classifier-free guidance has two halves (use 1 or 2)", mesh.CFG)
	}
	if mesh.CP > 1 {
		return m, fmt.Errorf("serve: mesh %v: serve's workers run pp x cfg x dp meshes (--cp runs in vdpp generate and vdpp bench)", mesh)
	}
	return mesh, nil
}
