package family

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/vdpp/vdpp/model/checkpoint"
	"github.com/vdpp/vdpp/model/knob"
)

// A family's job parameters are its knob table (Family.Knobs, package model/knob): every
// Params field a job may set, declared once under model/<family>, from which generate's
// flags, the server's native and OpenAI fields and its web form are derived. A knob of
// another family's table is refused on a model of this one, naming the families it
// belongs to (Unknown, RefuseUnread).

// Reads reports whether family f has the knob name (a Params JSON name) in its table.
// Commands refuse a knob whose family does not have it, rather than accept and ignore it.
func Reads(f Family, name string) bool { return f.Knobs().Has(name) }

// ReadersOf lists the registered families that have the knob name, sorted: what a refusal
// names as the families the knob belongs to.
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

// AllKnobs is the union of every registered family's knobs (knob.Union, families in name
// order): what a command that takes any model registers as flags.
func AllKnobs() knob.Table {
	mu.RLock()
	defer mu.RUnlock()
	var tables []knob.Table
	for _, n := range sortedNames() {
		tables = append(tables, families[n].Knobs())
	}
	return knob.Union(tables...)
}

// Unknown returns what a surface says of a knob name that family f's table lacks: the
// families it belongs to, or "" for a name no family has.
func Unknown(f Family) knob.Unknown {
	return func(name string) string {
		owners := ReadersOf(name)
		if len(owners) == 0 {
			return ""
		}
		return fmt.Sprintf("applies to %s models; this model is in the %s family, which does not read it", joinOr(owners), f.Name())
	}
}

// Knob is a command-line flag that sets a Params field: the flag's name, the field's JSON
// name, and whether the user set it (commands whose flags are not all knobs: bench).
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
		var own []string
		for _, o := range knobs {
			if Reads(f, o.Param) {
				own = append(own, "--"+o.Flag)
			}
		}
		return refusal("--"+k.Flag, k.Param, f, model, own)
	}
	return nil
}

// RefuseGiven is RefuseUnread for knobs given by name, spelled as flags: the first given
// knob that f's table lacks, naming the families it belongs to and f's own knobs among
// those of table (the flags the command registered).
func RefuseGiven(f Family, model string, table knob.Table, given knob.Given) error {
	own := f.Knobs()
	for _, name := range given.Names(table) {
		if own.Has(name) {
			continue
		}
		k, _ := table.Lookup(name)
		var mine []string
		common := knob.Common(knob.ModeFB, knob.ModeDeep, knob.ModeStatic)
		for _, o := range own {
			if !common.Has(o.Name) && table.Has(o.Name) {
				mine = append(mine, o.Spell(knob.Flags))
			}
		}
		return refusal(k.Spell(knob.Flags), name, f, model, mine)
	}
	return nil
}

// refusal is the error of a knob (spelled as flag) that family f does not read.
func refusal(flag, name string, f Family, model string, own []string) error {
	owners := ReadersOf(name)
	belongs := "no model family shipped here"
	if len(owners) > 0 {
		belongs = joinOr(owners) + " models"
	}
	msg := fmt.Sprintf("%s applies to %s; --model %s is in the %s family, which does not read it", flag, belongs, model, f.Name())
	if len(own) > 0 {
		msg += " (its own: " + strings.Join(own, " ") + ")"
	}
	return errors.New(msg)
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
