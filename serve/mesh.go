package serve

import (
	"fmt"

	"github.com/vdpp/vdpp/comm"
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

// checkJobMesh refuses (job.ErrBadParams, one line) a job the workers' mesh cannot run, as
// vdpp generate refuses the same run: an unguided job on cfg 2 (no halves to split), a job
// cut into temporal windows on cp (cp splits one clip's frames), fewer latent frames than
// cp ranks.
func (s *Server) checkJobMesh(p job.Params) error {
	m := s.cfg.Mesh
	if m.CFG == 2 && !p.Guided() && p.GuidanceScale <= 1 {
		return fmt.Errorf("%w: this server's workers run --cfg 2, the two halves of classifier-free guidance; an unguided job (max_guidance or guidance_scale at most 1) has none", job.ErrBadParams)
	}
	if m.CP <= 1 {
		return nil
	}
	if p.Window > 0 && p.Window < p.NumFrames {
		return fmt.Errorf("%w: this server's workers run --cp %d, which splits one clip's frames; a job cut into temporal windows (num_frames %d over window %d) cannot be split", job.ErrBadParams, m.CP, p.NumFrames, p.Window)
	}
	frames := p.NumFrames
	if fm := s.gen.Description().FrameMultiple; fm > 0 {
		frames = (p.NumFrames-1)/fm + 1
	}
	if m.CP > frames {
		return fmt.Errorf("%w: this server's workers run --cp %d, but the job's latent has %d frames: every cp rank needs a frame", job.ErrBadParams, m.CP, frames)
	}
	return nil
}
