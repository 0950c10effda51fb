package job

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/knob"
)

// ErrBadParams marks a request whose JSON parameters are malformed or out of range.
var ErrBadParams = errors.New("serve: bad parameters")

// ErrTooLarge marks a request beyond the server's limits (frames, resolution, steps).
var ErrTooLarge = errors.New("serve: request exceeds a server limit")

// Params are a job's generation parameters: the model family's (family.Params), the
// knobs of its table (family.Description.Knobs), the same as `vdpp generate`'s flags, in
// the job's JSON. Knobs a job leaves out take the served model's defaults.
type Params family.Params

// RunSpec is the part of a job's parameters a worker builds its step runner from besides
// the steps: the sampler choice and the LoRAs, as canonical JSON ("" for the model's defaults). Jobs
// batch together only with the same run spec.
func (p Params) RunSpec() string {
	r := runSpec{p.SchedulerChoice, p.LoRAs}
	if r.SchedulerChoice == (family.SchedulerChoice{}) && r.LoRAs.Empty() {
		return ""
	}
	b, err := json.Marshal(r)
	if err != nil {
		panic(err) // strings and finite float64s always marshal
	}
	return string(b)
}

// runSpec is what RunSpec encodes.
type runSpec struct {
	family.SchedulerChoice
	family.LoRAs
}

// ParseRunSpec reads what RunSpec wrote into the parameters it sets.
func ParseRunSpec(spec string) (Params, error) {
	var p Params
	if spec == "" {
		return p, nil
	}
	dec := json.NewDecoder(strings.NewReader(spec))
	dec.DisallowUnknownFields()
	var r runSpec
	if err := dec.Decode(&r); err != nil {
		return Params{}, fmt.Errorf("%w: run spec %q: %v", ErrBadParams, spec, err)
	}
	p.SchedulerChoice, p.LoRAs = r.SchedulerChoice, r.LoRAs
	return p, nil
}

// Limits bound what a request may ask for; the flags --max-frames, --max-resolution,
// --max-steps and --max-body-bytes set them.
type Limits struct {
	MaxFrames      int   // frames per video (0 in a Config: derived from the model, see DeriveMaxFrames)
	MaxResolution  int   // largest of height and width, in pixels
	MaxSteps       int   // denoising steps
	MaxBodyBytes   int64 // whole request body
	MaxImagePixels int   // decoded input image width*height (0 in a Config: derived from the model, see DeriveMaxImagePixels)
}

// DefaultLimits are the server's limits unless flags say otherwise.
func DefaultLimits() Limits {
	return Limits{MaxFrames: 25, MaxResolution: 1024, MaxSteps: 50, MaxBodyBytes: 10 << 20, MaxImagePixels: 4096 * 4096}
}

// DeriveMaxImagePixels is --max-image-pixels' default for a model whose native job is
// native: 16 times its pixels (four times its width and height), and at least a megapixel.
// An input image costs the coordinator work in proportion to its pixels and to how far it
// is scaled down (the resize before the image encoder filters every input pixel), and the
// coordinator prepares jobs one at a time, so one huge image would stall everyone's jobs.
// DeriveMaxImagePixels is pure.
func DeriveMaxImagePixels(native Params) int {
	return max(1<<20, 16*max(native.Height, 0)*max(native.Width, 0))
}

// ParseJob parses a job's JSON parameters for the model desc describes: every key a knob of
// its table (desc.Knobs), each value of the knob's kind and in its range, each key once
// (knob.Table.DecodeJSON; unknown says what a key of another family is), then Resolve. An
// empty body means all defaults.
func ParseJob(data []byte, desc family.Description, unknown knob.Unknown, check func(family.Params) error, lim Limits) (Params, error) {
	var p family.Params
	given, err := desc.Knobs.DecodeJSON(data, &p, unknown)
	if err != nil {
		return Params{}, badParams(err)
	}
	return Resolve(Params(p), given, desc, check, lim)
}

// Resolve returns the job whose knobs given are set as in p and the rest are the model's
// defaults (family.Description.ResolveJob: the knobs checked together, the temporal windows
// resolved), checked by the family's check of its folder (may be nil) and against lim
// (ErrTooLarge beyond it, naming the knob). Every refusal is one line naming the knob in the
// job's JSON spelling; knob.AsError finds the knob for another surface. A job of one window
// keeps window, overlap and blend zero.
func Resolve(p Params, given knob.Given, desc family.Description, check func(family.Params) error, lim Limits) (Params, error) {
	r, err := desc.ResolveJob(family.Params(p), given)
	if err != nil {
		return Params{}, badParams(err)
	}
	if check != nil {
		if err := check(r); err != nil {
			return Params{}, badParams(err)
		}
	}
	if err := Params(r).checkLimits(lim, desc.Knobs, given); err != nil {
		return Params{}, err
	}
	if r.NumFrames <= r.Window {
		r.Window, r.Overlap, r.Blend = 0, 0, ""
	}
	return Params(r), nil
}

// badParams wraps a refusal of the model's as ErrBadParams: a *knob.Error keeps its knob
// and its JSON spelling.
func badParams(err error) error {
	if ke, ok := knob.AsError(err); ok {
		return fmt.Errorf("%w: %w", ErrBadParams, ke)
	}
	return fmt.Errorf("%w: %s", ErrBadParams, strings.TrimPrefix(err.Error(), family.ErrParams.Error()+": "))
}

// CheckLimits refuses (ErrTooLarge, a *knob.Error of t naming the knob) a job beyond the
// server's limits: more frames than lim.MaxFrames, a side over lim.MaxResolution, more steps
// than lim.MaxSteps. Zero limits do not bound.
func (p Params) CheckLimits(lim Limits, t knob.Table) error { return p.checkLimits(lim, t, nil) }

// checkLimits is CheckLimits naming the knobs of given first: a knob the job left to the
// model's default that is over a limit is named as such, after any the job gave.
func (p Params) checkLimits(lim Limits, t knob.Table, given knob.Given) error {
	type over struct {
		name, format string
		args         []any
	}
	var all []over
	if lim.MaxFrames > 0 && p.NumFrames > lim.MaxFrames {
		all = append(all, over{"num_frames", "{num_frames} %d exceeds the server's --max-frames %d", []any{p.NumFrames, lim.MaxFrames}})
	}
	if lim.MaxResolution > 0 && p.Height > lim.MaxResolution {
		all = append(all, over{"height", "{height} %d exceeds the server's --max-resolution %d", []any{p.Height, lim.MaxResolution}})
	}
	if lim.MaxResolution > 0 && p.Width > lim.MaxResolution {
		all = append(all, over{"width", "{width} %d exceeds the server's --max-resolution %d", []any{p.Width, lim.MaxResolution}})
	}
	if lim.MaxSteps > 0 && p.Steps > lim.MaxSteps {
		all = append(all, over{"steps", "{steps} %d exceeds the server's --max-steps %d", []any{p.Steps, lim.MaxSteps}})
	}
	if len(all) == 0 {
		return nil
	}
	pick := all[0]
	for _, o := range all {
		if given[o.name] {
			pick = o
			break
		}
	}
	format := pick.format
	if given != nil && !given[pick.name] {
		format += " (the model's default: give {" + pick.name + "})"
	}
	return fmt.Errorf("%w: %w", ErrTooLarge, t.Errorf(pick.name, format, pick.args...))
}

// loraKeys are the JSON keys of a job's LoRAs (family.LoRAs): files of the server's LoRA
// folder, checked by the server, not knobs of the model's table.
var loraKeys = []string{"lora", "lora_2"}

// SplitLoRAs takes a job's LoRAs (lora, lora_2: [{"name": FILE, "strength": S}, ...]) out of
// its JSON parameters: the object without them (every other key as it was, a key given
// twice still twice, for the knob table's decoder to refuse) and the LoRAs. Data that is
// not an object is returned as it is (the decoder names what is wrong).
func SplitLoRAs(data []byte) ([]byte, family.LoRAs, error) {
	var l family.LoRAs
	if !bytes.Contains(data, []byte(`"lora`)) {
		return data, l, nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return data, l, nil
	}
	var rest bytes.Buffer
	rest.WriteByte('{')
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return data, l, nil
		}
		key, _ := t.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return data, l, nil
		}
		if slices.Contains(loraKeys, key) {
			if seen[key] {
				return nil, l, fmt.Errorf("%w: %s is given twice", ErrBadParams, key)
			}
			seen[key] = true
			dst := &l.LoRA
			if key == "lora_2" {
				dst = &l.LoRA2
			}
			d := json.NewDecoder(bytes.NewReader(raw))
			d.DisallowUnknownFields()
			if err := d.Decode(dst); err != nil {
				return nil, l, fmt.Errorf("%w: %s: want a list of {\"name\": FILE, \"strength\": S}: %v", ErrBadParams, key, err)
			}
			continue
		}
		if rest.Len() > 1 {
			rest.WriteByte(',')
		}
		k, _ := json.Marshal(key)
		rest.Write(k)
		rest.WriteByte(':')
		rest.Write(raw)
	}
	rest.WriteByte('}')
	return rest.Bytes(), l, nil
}
