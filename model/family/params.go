package family

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/vdpp/vdpp/model/checkpoint"
)

// FamilyParams are the Params fields, by JSON name, that only some families read: SVD's
// per-frame guidance ramp, motion and noise conditioning, decode chunk and VAE tiling, and
// a text-to-video model's CFG scales. Every family reads the other fields (frames, steps,
// size, seed, frame rate, windows).
var FamilyParams = []string{
	"min_guidance", "max_guidance", "motion_bucket_id", "noise_aug_strength", "decode_chunk_size", "vae_tile",
	"guidance_scale", "guidance_scale_2",
}

// ParamReader is implemented by families that read only some of FamilyParams: ReadsParam
// says whether the family reads the Params field name (a JSON name of FamilyParams). A
// family that does not implement it is taken to read them all.
type ParamReader interface {
	ReadsParam(name string) bool
}

// Reads reports whether family f reads the Params field name (JSON name): always for a
// field every family reads, else as f's ParamReader says. Commands refuse a flag whose
// field the model's family does not read, rather than accept and ignore it.
func Reads(f Family, name string) bool {
	if !slices.Contains(FamilyParams, name) {
		return true
	}
	r, ok := f.(ParamReader)
	return !ok || r.ReadsParam(name)
}

// ReadersOf lists the registered families that read the Params field name, sorted: what a
// refusal names as the families the flag belongs to.
func ReadersOf(name string) []string {
	mu.RLock()
	defer mu.RUnlock()
	var out []string
	for n, f := range families {
		if Reads(f, name) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// Knob is a command-line flag that sets a Params field: the flag's name, the field's JSON
// name, and whether the user set it.
type Knob struct {
	Flag, Param string
	Set         bool
}

// RefuseUnread returns an error for the first set knob whose field family f does not read,
// naming the families it belongs to, f (model is the --model value, for the message) and
// the knobs among knobs that f does read; nil when f reads every set knob.
func RefuseUnread(f Family, model string, knobs []Knob) error {
	for _, k := range knobs {
		if !k.Set || Reads(f, k.Param) {
			continue
		}
		owners := ReadersOf(k.Param)
		belongs := "no model family shipped here"
		if len(owners) > 0 {
			belongs = joinOr(owners) + " models"
		}
		var own []string
		for _, o := range knobs {
			if Reads(f, o.Param) {
				own = append(own, "--"+o.Flag)
			}
		}
		msg := fmt.Sprintf("--%s applies to %s; --model %s is in the %s family, which does not read it", k.Flag, belongs, model, f.Name())
		if len(own) > 0 {
			msg += " (its own: " + strings.Join(own, " ") + ")"
		}
		return errors.New(msg)
	}
	return nil
}

// joinOr joins names as "a", "a or b", "a, b or c".
func joinOr(names []string) string {
	if len(names) <= 1 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// WithSampling returns p with the generation defaults a folder's vdpp_sampling.json sets
// (smp's non-zero NumFrames, Height and Width, Steps, GuidanceScale): a small model's
// sizes in place of its family's.
func WithSampling(p Params, smp checkpoint.Sampling) Params {
	if smp.NumFrames > 0 {
		p.NumFrames = smp.NumFrames
	}
	if smp.Height > 0 && smp.Width > 0 {
		p.Height, p.Width = smp.Height, smp.Width
	}
	if smp.Steps > 0 {
		p.Steps = smp.Steps
	}
	if smp.GuidanceScale > 0 {
		p.GuidanceScale = smp.GuidanceScale
	}
	return p
}
