package knob

import (
	"slices"
	"strings"
)

// InputKind is what an input is: a text or an image file.
type InputKind string

// The kinds of inputs.
const (
	TextInput  InputKind = "text"  // text: a part of a native create, a field of the OpenAI one, a flag's value
	ImageInput InputKind = "image" // a PNG or JPEG: a file part, an OpenAI reference, a flag naming a file
)

// Need is whether a model takes an input.
type Need string

// The needs of an input.
const (
	Required Need = "required" // the model cannot run without it
	Optional Need = "optional" // it takes one, and runs without
	None     Need = "none"     // it takes none: given, it is refused
)

// Input is a job's input that is not a parameter: a text or an image the model is
// conditioned on. It is the native create's multipart part Name, `vdpp generate`'s flag
// (FlagName), the OpenAI create's field OpenAI ("" when that API cannot carry it) and a
// field of the web page's form; Need says whether the served model takes it.
type Input struct {
	Name   string    `json:"name"`
	Flag   string    `json:"flag"`
	OpenAI string    `json:"openai,omitempty"`
	Kind   InputKind `json:"kind"`
	Need   Need      `json:"need"`
	Help   string    `json:"help"`
}

// FlagName is the input's flag: Flag, or Name with dashes.
func (in Input) FlagName() string {
	if in.Flag != "" {
		return in.Flag
	}
	return strings.ReplaceAll(in.Name, "_", "-")
}

// Spell is the input's name in spelling s: "image part" (JSON: the native create's
// part), "--image", "input_reference" (the OpenAI field; the part's name when the OpenAI
// create cannot carry it).
func (in Input) Spell(s Spelling) string {
	switch s {
	case Flags:
		return "--" + in.FlagName()
	case OpenAI:
		if in.OpenAI != "" {
			return in.OpenAI
		}
	}
	return in.Name + " part"
}

// Inputs are the inputs a job may give, in the order the page shows them.
type Inputs []Input

// AllInputs are every input any model takes, declared once, their Need unset: a model's
// description says which it takes (family.Description.Inputs, Need).
var AllInputs = Inputs{
	{Name: "image", OpenAI: "input_reference", Kind: ImageInput,
		Help: "the image the video starts from (PNG or JPEG; image-to-video, optional for text-image-to-video)"},
	{Name: "last_image", Kind: ImageInput,
		Help: "the image the video ends on (PNG or JPEG; first-last-frame models, optional for some image-to-video ones)"},
	{Name: "prompt", OpenAI: "prompt", Kind: TextInput,
		Help: "what the video shows (text-to-video, and image-to-video models with a text encoder), encoded by the model's text encoder"},
	{Name: "negative_prompt", OpenAI: "negative_prompt", Kind: TextInput,
		Help: "what the video should not show, the unconditional half of classifier-free guidance (text-to-video; default none)"},
}

// Need returns the inputs with each one's Need from needs (None when needs has no entry).
func (t Inputs) Need(needs map[string]Need) Inputs {
	out := slices.Clone(t)
	for i := range out {
		out[i].Need = needs[out[i].Name]
		if out[i].Need == "" {
			out[i].Need = None
		}
	}
	return out
}

// Lookup returns the input named name (its native part).
func (t Inputs) Lookup(name string) (Input, bool) {
	i := slices.IndexFunc(t, func(in Input) bool { return in.Name == name })
	if i < 0 {
		return Input{}, false
	}
	return t[i], true
}

// Taken are the inputs whose Need is not None.
func (t Inputs) Taken() Inputs {
	return slices.DeleteFunc(slices.Clone(t), func(in Input) bool { return in.Need == None })
}

// OfKind are the inputs of kind k.
func (t Inputs) OfKind(k InputKind) Inputs {
	return slices.DeleteFunc(slices.Clone(t), func(in Input) bool { return in.Kind != k })
}

// Names lists the inputs' names, in order.
func (t Inputs) Names() []string {
	out := make([]string, len(t))
	for i, in := range t {
		out[i] = in.Name
	}
	return out
}

// OpenAINames lists the OpenAI fields of the inputs that have one, in order.
func (t Inputs) OpenAINames() []string {
	var out []string
	for _, in := range t {
		if in.OpenAI != "" {
			out = append(out, in.OpenAI)
		}
	}
	return out
}
