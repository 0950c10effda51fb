package wan

import "github.com/vdpp/vdpp/model/knob"

// Knobs is Wan's knob table (family.Family.Knobs): the common knobs with the cache modes
// its transformer runs, and WanPipeline's classifier-free guidance scales (the second the
// low-noise expert's of a two-expert model).
var Knobs = append(knob.Common(Caching.Modes...),
	knob.Knob{Name: "guidance_scale", Kind: knob.Float, Min: 0, Max: 100, Mesh: knob.Guides, Group: knob.Basic,
		Help: "classifier-free guidance scale; above 1 turns it on (5 by default, WanPipeline's)"},
	knob.Knob{Name: "guidance_scale_2", Kind: knob.Float, Min: 0, Max: 100, Default: "guidance_scale", Group: knob.Advanced,
		Help: "guidance scale of a two-expert model's low-noise expert (0: guidance_scale)"},
)

// Knobs implements family.Family.
func (wanFamily) Knobs() knob.Table { return Knobs }
