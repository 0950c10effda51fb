package knob

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/vdpp/vdpp/internal/cli"
)

// Unknown says what a knob name that a table lacks is, for the message: "applies to svd
// models" (nil: it is simply unknown).
type Unknown func(name string) string

// DecodeJSON decodes a job's JSON object into *params: every key a knob of t, each value
// of its knob's kind and in its range (parseJSON), each key once. A null value is as
// absent. It returns the knobs the object gave; an empty body gives none. Keys of no knob
// are refused, named with what unknown says of them.
func (t Table) DecodeJSON(data []byte, params any, unknown Unknown) (Given, error) {
	given := Given{}
	if len(bytes.TrimSpace(data)) == 0 {
		return given, nil
	}
	members, err := Object(data)
	if err != nil {
		return nil, t.Errorf("", "%v", err)
	}
	for _, m := range members {
		k, ok := t.Lookup(m.Key)
		if !ok {
			return nil, t.unknown(m.Key, unknown)
		}
		if string(m.Value) == "null" {
			continue
		}
		v, err := k.parseJSON(m.Value)
		if err != nil {
			return nil, err.(*Error).With(t)
		}
		f, err := field(params, k)
		if err != nil {
			return nil, err
		}
		set(f, v)
		given[k.Name] = true
	}
	return given, nil
}

// unknown is the error of a key no knob of t has.
func (t Table) unknown(name string, unknown Unknown) *Error {
	if unknown != nil {
		if what := unknown(name); what != "" {
			return t.Errorf(name, "{%s} %s", name, what)
		}
	}
	if near := t.nearest(name); near != "" {
		return t.Errorf("", "unknown parameter %q (did you mean {%s}?)", name, near)
	}
	return t.Errorf("", "unknown parameter %q", name)
}

// nearest is the knob whose name is closest to name (edit distance at most 2), or "".
func (t Table) nearest(name string) string {
	best, bestD := "", 3
	for _, k := range t {
		if d := cli.Distance(name, k.Name); d < bestD {
			best, bestD = k.Name, d
		}
	}
	return best
}

// Member is one key and value of a JSON object.
type Member struct {
	Key   string
	Value json.RawMessage
}

// Object splits a JSON object into its members in order, refusing anything else: not an
// object, a key given twice, trailing data after the object.
func Object(data []byte) ([]Member, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("the body is not a JSON object: %v", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("the body is not a JSON object")
	}
	var out []Member
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("the body is not a JSON object: %v", err)
		}
		key := tok.(string) // an object's keys are strings
		if seen[key] {
			return nil, fmt.Errorf("%q is given twice", key)
		}
		seen[key] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("the body is not a JSON object: %v", err)
		}
		out = append(out, Member{Key: key, Value: raw})
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, fmt.Errorf("the body is not a JSON object: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the JSON object")
	}
	return out, nil
}

// Check refuses the given knobs of *params out of their ranges (values set in code were
// not read by a surface that checks them) or that do not apply together: a knob of a cache
// mode other than the job's (Modes), a knob given without its With knob, a knob above its
// AtMost knob. A knob whose AtMost knob was given and it was not follows that one down.
func (t Table) Check(params any, given Given) error {
	for _, k := range t {
		if !given[k.Name] {
			continue
		}
		v, err := t.Get(params, k.Name)
		if err != nil {
			return err
		}
		if err := t.checkValue(k, v); err != nil {
			return err
		}
	}
	mode := ""
	if t.Has(CacheKnob) {
		v, err := t.Get(params, CacheKnob)
		if err != nil {
			return err
		}
		mode = v.(string)
	}
	for _, k := range t {
		if !given[k.Name] || k.AppliesUnder(mode) {
			continue
		}
		if mode == "" || mode == "none" {
			return t.Errorf(k.Name, "{%s} applies to {%s} %s only, and no cache is set", k.Name, CacheKnob, joinOr(k.Modes))
		}
		return t.Errorf(k.Name, "{%s} applies to {%s} %s, not %s", k.Name, CacheKnob, joinOr(k.Modes), mode)
	}
	for _, k := range t {
		if given[k.Name] && k.With != "" && t.Has(k.With) && !given[k.With] {
			return t.Errorf(k.Name, "{%s} without {%s}: give both (or neither, for the model's)", k.Name, k.With)
		}
	}
	for _, k := range t {
		if k.AtMost == "" || !t.Has(k.AtMost) {
			continue
		}
		v, lim := t.Float(params, k.Name), t.Float(params, k.AtMost)
		if v <= lim {
			continue
		}
		if !given[k.Name] && given[k.AtMost] {
			f, err := field(params, k)
			if err != nil {
				return err
			}
			f.SetFloat(lim)
			continue
		}
		return t.Errorf(k.Name, "{%s} %v is above {%s} %v", k.Name, v, k.AtMost, lim)
	}
	return nil
}

// checkValue checks a value of knob k (as its field holds it) against its range.
func (t Table) checkValue(k Knob, v any) error {
	var err error
	switch x := v.(type) {
	case int:
		err = k.checkNumber(float64(x), fmt.Sprint(x))
	case int64:
		err = k.checkNumber(float64(x), fmt.Sprint(x))
	case float64:
		err = k.checkNumber(x, fmt.Sprint(x))
	case string:
		err = k.checkString(x)
	case []int:
		err = k.checkSteps(x)
	}
	if err != nil {
		return err.(*Error).With(t)
	}
	return nil
}

// Guided reports whether *params turns classifier-free guidance on: a Guides knob above 1.
func (t Table) Guided(params any) bool {
	for _, k := range t {
		if k.Mesh == Guides && t.Float(params, k.Name) > 1 {
			return true
		}
	}
	return false
}

// CheckMesh refuses a job *params that a mesh of cfg x cp ranks per stage cannot run: an
// unguided job on cfg 2 (no halves to split; the Guides knobs named), a job cut into
// temporal windows on cfg or cp above 1 (windows run on pp x dp meshes only), fewer latent
// frames than cp ranks (latentFrames maps a frame count to the latent's). The knobs are
// named in the message.
func (t Table) CheckMesh(params any, cfg, cp int, latentFrames func(frames int) int) error {
	var guides []string
	for _, k := range t {
		if k.Mesh == Guides {
			guides = append(guides, "{"+k.Name+"}")
		}
	}
	if cfg == 2 && !t.Guided(params) && len(guides) > 0 {
		return t.Errorf(guides[0][1:len(guides[0])-1], "the mesh runs --cfg 2, the two halves of classifier-free guidance on two ranks; an unguided job (%s at most 1) has none", joinOr(guides))
	}
	frames := 0
	for _, k := range t {
		if k.Mesh == Frames {
			frames = int(t.Float(params, k.Name))
		}
	}
	if cfg > 1 || cp > 1 {
		for _, k := range t {
			if k.Mesh != Windows {
				continue
			}
			if w := int(t.Float(params, k.Name)); w > 0 && w < frames {
				return t.Errorf(k.Name, "the mesh runs --cfg %d --cp %d, and temporal windows run on pp x dp meshes only: a job cut into windows (%d frames over {%s} %d) cannot run there", cfg, cp, frames, k.Name, w)
			}
		}
	}
	if cp <= 1 {
		return nil
	}
	for _, k := range t {
		if k.Mesh != Frames {
			continue
		}
		if lf := latentFrames(frames); cp > lf {
			return t.Errorf(k.Name, "the mesh runs --cp %d, but {%s} %d gives a latent of %d frames: every cp rank needs one", cp, k.Name, frames, lf)
		}
	}
	return nil
}

// joinOr joins names as "a", "a or b", "a, b or c".
func joinOr(names []string) string {
	switch len(names) {
	case 0:
		return ""
	case 1:
		return names[0]
	}
	return fmt.Sprint(joinComma(names[:len(names)-1]), " or ", names[len(names)-1])
}

func joinComma(names []string) string {
	out := ""
	for i, n := range names {
		if i > 0 {
			out += ", "
		}
		out += n
	}
	return out
}

// Sorted returns t's knobs grouped in Groups order, table order within a group.
func (t Table) Sorted() Table {
	out := make(Table, 0, len(t))
	for _, g := range Groups {
		for _, k := range t {
			if k.Group == g {
				out = append(out, k)
			}
		}
	}
	for _, k := range t {
		if !slices.Contains(Groups, k.Group) {
			out = append(out, k)
		}
	}
	return out
}
