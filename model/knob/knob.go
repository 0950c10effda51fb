// Package knob is the declaration of a model family's job parameters: one Table per
// family (declared under model/<family>, exposed by the family seam, model/family), from
// which every surface that takes a generation's parameters is derived: `vdpp generate`'s
// flags, the inference server's native JSON and OpenAI fields, its web page's form, and the
// error messages of all of them. A knob cannot be accepted by one surface and refused by
// another, because there is only the one declaration.
//
// A knob is a field of the parameters struct (family.Params) named by its JSON tag: Name
// is that tag. The table says its type (Kind), its range, when it applies (Modes: the step
// cache modes; Mesh: how it meets a pp x cfg x cp x dp mesh), how each surface spells it
// (Flag, OpenAI) and what it means (Help, Group). Values are read and written through
// reflection on the struct's JSON tags, so the package knows no family and imports only
// the standard library.
//
// Contract: every value a surface admits is in the knob's range and of its kind, decoded
// exactly (an integer is an integer: 1.5, "1e3", 2^63 and a string are refused, never
// rounded); a knob given where it does not apply (a cache mode's field under another mode)
// is refused, never ignored; a JSON object with a key twice is refused. Errors are *Error:
// one line naming the knob, rendered in the spelling of the surface that reads them
// (Error.In).
package knob

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// ErrParams marks parameters a model cannot run: a value out of its knob's range or of the
// wrong kind, a knob that does not apply, an unknown knob. Every *Error wraps it.
var ErrParams = errors.New("bad parameters")

// Kind is the type of a knob's value.
type Kind string

// The kinds of knobs and the Go field types that hold them.
const (
	Int    Kind = "int"    // a whole number: int or int64
	Float  Kind = "float"  // a finite number: float64
	String Kind = "string" // text, one of Choices when the knob has them: string
	Bool   Kind = "bool"   // true or false: bool
	// Steps is a list of ascending step indices: []int; JSON [0, 1, 5], text "0-1,5".
	Steps Kind = "steps"
)

// Mesh says how a knob meets the mesh a job runs on (Table.CheckMesh).
type Mesh string

// The mesh roles of a knob.
const (
	// Guides: a value above 1 turns classifier-free guidance on; a cfg 2 mesh (the two
	// halves of guidance on two ranks) runs only jobs where some Guides knob is above 1.
	Guides Mesh = "guides"
	// Frames: the video's length in frames; a cp mesh splits the latent's frames and
	// needs one per rank.
	Frames Mesh = "frames"
	// Windows: a window shorter than the video cuts it into temporal windows, which a cp
	// mesh (one clip's frames split over ranks) cannot split.
	Windows Mesh = "windows"
)

// Group is the section of the help and of the web page's form a knob is shown in.
type Group string

// The groups, in the order they are shown.
const (
	Basic    Group = "basic"    // size, length, steps, guidance, seed
	Long     Group = "long"     // a video longer than the model's native length
	Cache    Group = "cache"    // the step cache
	Advanced Group = "advanced" // the family's conditioning and decoding details
)

// Groups are the groups in the order they are shown.
var Groups = []Group{Basic, Long, Cache, Advanced}

// CacheKnob is the knob whose value is the step cache mode; Knob.Modes name its values.
const CacheKnob = "cache"

// Knob is one job parameter.
type Knob struct {
	// Name is the parameter's name in a job's JSON and the JSON tag of the parameters
	// struct's field that holds it ("cache_interval").
	Name string `json:"name"`
	// Flag is `vdpp generate`'s flag, without dashes ("cache-interval"); "" is Name with
	// dashes for underscores (FlagName).
	Flag string `json:"flag"`
	// OpenAI is the OpenAI create's field ("num_inference_steps"); "" is Name (OpenAIName).
	// OpenAIAlso are other OpenAI fields that set it ("guidance_scale" sets an
	// image-to-video model's max_guidance).
	OpenAI     string   `json:"openai"`
	OpenAIAlso []string `json:"openai_also,omitempty"`
	Kind       Kind     `json:"kind"`
	// Min and Max bound an Int or Float value (inclusive; MinOpen excludes Min), and the
	// entries of a Steps list. Both zero: no bound but finiteness. An unbounded Int's Max
	// is math.MaxInt64.
	Min     float64 `json:"min"`
	Max     float64 `json:"max"`
	MinOpen bool    `json:"min_open,omitempty"`
	// Choices are a String's values (none: any text).
	Choices []string `json:"choices,omitempty"`
	// MaxLen bounds a Steps list's entries (0: Max+1, one per step).
	MaxLen int `json:"max_len,omitempty"`
	// Modes are the step cache modes (values of the "cache" knob) under which the knob
	// applies; given under another mode (or none) it is refused. Empty: always.
	Modes []string `json:"modes,omitempty"`
	// Mesh is how the knob meets the mesh a job runs on ("" : it does not).
	Mesh Mesh `json:"mesh,omitempty"`
	// With names a knob that must be given with this one (height with width): one given
	// alone is refused.
	With string `json:"with,omitempty"`
	// AtMost names a knob this one may not exceed; when only that one is given and this
	// one's default is above it, this one follows it down (a guidance ramp's first frame
	// follows its last).
	AtMost string `json:"at_most,omitempty"`
	// Default says what a job that leaves the knob out gets, when it is not the model's
	// own default ("0.05", "random"); "" is the model's.
	Default string `json:"default_text,omitempty"`
	// Help says what the knob does, in one sentence (flags' help, the page's hint).
	Help  string `json:"help"`
	Group Group  `json:"group"`
}

// FlagName is the knob's flag: Flag, or Name with dashes.
func (k Knob) FlagName() string {
	if k.Flag != "" {
		return k.Flag
	}
	return strings.ReplaceAll(k.Name, "_", "-")
}

// OpenAIName is the knob's OpenAI field: OpenAI, or Name.
func (k Knob) OpenAIName() string {
	if k.OpenAI != "" {
		return k.OpenAI
	}
	return k.Name
}

// OpenAINames are every OpenAI field that sets the knob: OpenAIName first, then OpenAIAlso.
func (k Knob) OpenAINames() []string { return append([]string{k.OpenAIName()}, k.OpenAIAlso...) }

// bounded reports whether the knob has a range beyond finiteness.
func (k Knob) bounded() bool { return k.Min != 0 || k.Max != 0 }

// Range describes the knob's values for a message: "[2, 1000]", "> 0", "one of a, b".
func (k Knob) Range() string {
	switch {
	case len(k.Choices) > 0:
		return "one of " + strings.Join(k.Choices, ", ")
	case !k.bounded():
		return "finite"
	case k.MinOpen && k.Max == math.MaxInt64:
		return "> " + num(k.Min)
	case k.MinOpen:
		return fmt.Sprintf("in (%s, %s]", num(k.Min), num(k.Max))
	case k.Max == math.MaxInt64:
		return ">= " + num(k.Min)
	}
	return fmt.Sprintf("in [%s, %s]", num(k.Min), num(k.Max))
}

// num writes a bound as the user would: 1048576, 0.05, 1e+30.
func num(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return fmt.Sprintf("%d", int64(v))
	}
	return fmt.Sprintf("%g", v)
}

// AppliesUnder reports whether the knob applies under the step cache mode mode.
func (k Knob) AppliesUnder(mode string) bool {
	return len(k.Modes) == 0 || slices.Contains(k.Modes, mode)
}

// Table is a family's knobs, in the order the help and the page show them.
type Table []Knob

// Lookup returns the knob named name.
func (t Table) Lookup(name string) (Knob, bool) {
	i := slices.IndexFunc(t, func(k Knob) bool { return k.Name == name })
	if i < 0 {
		return Knob{}, false
	}
	return t[i], true
}

// Has reports whether the table has the knob named name.
func (t Table) Has(name string) bool {
	_, ok := t.Lookup(name)
	return ok
}

// ByFlag returns the knob whose flag is flag.
func (t Table) ByFlag(flag string) (Knob, bool) {
	i := slices.IndexFunc(t, func(k Knob) bool { return k.FlagName() == flag })
	if i < 0 {
		return Knob{}, false
	}
	return t[i], true
}

// ByOpenAI returns the knob an OpenAI field sets.
func (t Table) ByOpenAI(field string) (Knob, bool) {
	i := slices.IndexFunc(t, func(k Knob) bool { return slices.Contains(k.OpenAINames(), field) })
	if i < 0 {
		return Knob{}, false
	}
	return t[i], true
}

// Names lists the knobs' names, in table order.
func (t Table) Names() []string {
	out := make([]string, len(t))
	for i, k := range t {
		out[i] = k.Name
	}
	return out
}

// Union joins tables: every knob once, by name, as the first table that declares it does,
// with the Choices of every declaration (the modes each family offers). What a command
// that takes any family's knobs registers (`vdpp generate`'s flags).
func Union(tables ...Table) Table {
	var out Table
	for _, t := range tables {
		for _, k := range t {
			i := slices.IndexFunc(out, func(o Knob) bool { return o.Name == k.Name })
			if i < 0 {
				k.Choices = slices.Clone(k.Choices)
				out = append(out, k)
				continue
			}
			for _, c := range k.Choices {
				if !slices.Contains(out[i].Choices, c) {
					out[i].Choices = append(out[i].Choices, c)
				}
			}
		}
	}
	return out
}

// Spelling is how a surface names knobs in its messages.
type Spelling int

// The surfaces' spellings.
const (
	JSON   Spelling = iota // the native API's JSON names: cache_interval
	Flags                  // `vdpp generate`'s flags: --cache-interval
	OpenAI                 // the OpenAI API's fields: num_inference_steps
)

// Spell is the knob's name in spelling s.
func (k Knob) Spell(s Spelling) string {
	switch s {
	case Flags:
		return "--" + k.FlagName()
	case OpenAI:
		return k.OpenAIName()
	}
	return k.Name
}

// Error is a parameter a model cannot run: the knob at fault and what is wrong, in one
// line. The message names knobs as {name}; In renders them in a surface's spelling.
type Error struct {
	// Knob is the name of the knob at fault ("" when none is: an unknown one is named in
	// the message).
	Knob string
	// msg is the message with {name} for every knob it names.
	msg   string
	table Table
	// marks are sentinels the error also is (Mark), besides ErrParams.
	marks []error
}

// Errorf returns an *Error about knob name (its name may appear in format as {name}, as may
// other knobs' names); t spells them (nil: as their names).
func (t Table) Errorf(name, format string, args ...any) *Error {
	return &Error{Knob: name, msg: fmt.Sprintf(format, args...), table: t}
}

// Errorf is Table.Errorf with no table: knobs are spelled by their JSON names until a
// surface that knows the table renders the error (In, With).
func Errorf(name, format string, args ...any) *Error { return Table(nil).Errorf(name, format, args...) }

// With returns e spelled by table t when e has no table yet.
func (e *Error) With(t Table) *Error {
	if e.table != nil {
		return e
	}
	c := *e
	c.table = t
	return &c
}

// Error is the message in the JSON spelling.
func (e *Error) Error() string { return e.In(JSON) }

// Unwrap is ErrParams and the sentinels of Mark.
func (e *Error) Unwrap() []error { return append([]error{ErrParams}, e.marks...) }

// Mark returns e marked as sentinel too (errors.Is(e, sentinel)): a package's own kind of
// bad parameter ("pipeline: bad cache").
func (e *Error) Mark(sentinel error) *Error {
	c := *e
	c.marks = append(append([]error(nil), e.marks...), sentinel)
	return &c
}

// In renders the message in spelling s: each {name} of a knob of the table becomes the
// knob's spelling; a {name} of no known knob becomes name.
func (e *Error) In(s Spelling) string {
	var b strings.Builder
	msg := e.msg
	for {
		i := strings.IndexByte(msg, '{')
		if i < 0 {
			break
		}
		j := strings.IndexByte(msg[i:], '}')
		if j < 0 {
			break
		}
		name := msg[i+1 : i+j]
		b.WriteString(msg[:i])
		if k, ok := e.table.Lookup(name); ok && validName(name) {
			b.WriteString(k.Spell(s))
		} else if validName(name) {
			b.WriteString(spellUnknown(name, s))
		} else {
			b.WriteString(msg[i : i+j+1])
		}
		msg = msg[i+j+1:]
	}
	b.WriteString(msg)
	return b.String()
}

// spellUnknown spells a name no table knows as surface s would.
func spellUnknown(name string, s Spelling) string {
	if s == Flags {
		return "--" + strings.ReplaceAll(name, "_", "-")
	}
	return name
}

// validName reports whether name can be a knob's name (lower case, digits, underscores).
func validName(name string) bool {
	if name == "" {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return true
}

// AsError returns err's *Error, if it holds one.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}
