package generate

import (
	"strings"

	"github.com/vdpp/vdpp/model/family"
)

// resolveWindows fills the temporal window defaults from the model's description (the
// family's windowing, its native frame count, the VAE's temporal factor) and refuses
// windows the model cannot run, one line each (family.Description.ResolveWindows). A
// video of at most the native length with no --window runs as one window, as before.
func resolveWindows(o Options, d family.Description) (Options, error) {
	p, err := d.ResolveWindows(family.Params{NumFrames: o.NumFrames, Window: o.Window, Overlap: o.Overlap, Blend: o.Blend}, "--")
	if err != nil {
		// One line under this command's prefix: the family's sentinel adds nothing here.
		return o, badOptions("%s", strings.TrimPrefix(err.Error(), family.ErrParams.Error()+": "))
	}
	o.Window, o.Overlap, o.Blend = p.Window, p.Overlap, p.Blend
	return o, nil
}
