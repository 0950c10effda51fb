package serve

import (
	"fmt"

	"github.com/vdpp/vdpp/comm"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/serve/job"
)

// The workers of a server are laid out as a comm.Mesh with comm's rank order: DP
// replicas, each a pipeline of PP stages, each stage one worker rank, or a unit of CFG x CP
// ranks (unit.go) whose leader the dispatcher sees, so the dispatcher sees one worker per
// stage of each replica.

// resolveMesh returns the workers' mesh of Config's NProc and Mesh: Mesh when set (NProc,
// when also set, must be its size; cfg above 2 is refused), else a pipeline of NProc
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
	return mesh, nil
}

// checkJobMesh refuses (job.ErrBadParams, one line naming the knob) a job the workers'
// mesh cannot run, as vdpp generate refuses the same run (family.Description.CheckMesh):
// an unguided job on cfg 2 (no halves to split), a job cut into temporal windows on cp (cp
// splits one clip's frames), fewer latent frames than cp ranks.
func (s *Server) checkJobMesh(p job.Params) error {
	m := s.cfg.Mesh
	if err := s.gen.Description().CheckMesh(family.Params(p), m.CFG, m.CP); err != nil {
		return fmt.Errorf("%w: %w", job.ErrBadParams, err)
	}
	return nil
}
