package family

import (
	"github.com/vdpp/vdpp/model/knob"
)

// ResolveJob returns the parameters of a job that set the knobs given to their values in
// p and left the others to the model (Defaults): the knobs of given are taken from p, the
// rest from the defaults, then checked together (knob.Table.Check: a cache mode's field
// under another mode, a knob given without its pair, a guidance ramp upside down) and the
// temporal windows resolved (ResolveWindows; a window or overlap left out is the family's).
// Errors are *knob.Error naming the knob, for the caller to spell. The family's own checks
// of the folder (sizes its VAE takes, frame counts) are Sampler.Validate's (Resolved.Validate).
func (d Description) ResolveJob(p Params, given knob.Given) (Params, error) {
	t := d.Knobs
	out := d.Defaults
	if err := t.Merge(&out, &d.Defaults, &p, given); err != nil {
		return Params{}, err
	}
	if err := t.Check(&out, given); err != nil {
		return Params{}, err
	}
	if !given["window"] {
		out.Window = 0
	}
	if !given["overlap"] {
		out.Overlap = -1
	}
	if !given["blend"] {
		out.Blend = ""
	}
	return d.ResolveWindows(out)
}

// Guided reports whether p turns classifier-free guidance on (a knob of the table whose
// mesh role is knob.Guides is above 1).
func (d Description) Guided(p Params) bool { return d.Knobs.Guided(&p) }

// CheckMesh refuses a job p that a mesh of cfg x cp ranks per stage cannot run, as
// generate and the server both refuse it (knob.Table.CheckMesh): an unguided job on cfg 2,
// temporal windows on cp, fewer latent frames than cp ranks.
func (d Description) CheckMesh(p Params, cfg, cp int) error {
	return d.Knobs.CheckMesh(&p, cfg, cp, d.LatentFrames)
}

// Validate checks p against the resolved model's folder (Sampler.Validate of the family
// opened with no role, which loads no weights): sizes its VAE takes, frame counts, a
// cache branch its network has.
func (r Resolved) Validate(p Params) error {
	s, err := r.Open(Options{})
	if err != nil {
		return err
	}
	defer s.Close()
	return s.Validate(p)
}
