package knob

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

// params is a parameters struct as family.Params is: knobs by JSON tag, one embedded.
type params struct {
	NumFrames int     `json:"num_frames"`
	Steps     int     `json:"steps"`
	Height    int     `json:"height"`
	Width     int     `json:"width"`
	FPS       int     `json:"fps"`
	Seed      int64   `json:"seed"`
	Window    int     `json:"window,omitempty"`
	Overlap   int     `json:"overlap,omitempty"`
	Blend     string  `json:"blend,omitempty"`
	Min       float64 `json:"min_guidance"`
	Max       float64 `json:"max_guidance"`
	Sched     string  `json:"scheduler,omitempty"`
	Shift     float64 `json:"flow_shift,omitempty"`
	cache
}

type cache struct {
	Mode      string  `json:"cache,omitempty"`
	Threshold float64 `json:"cache_threshold,omitempty"`
	Interval  int     `json:"cache_interval,omitempty"`
	Branch    int     `json:"cache_branch,omitempty"`
	CSteps    []int   `json:"cache_steps,omitempty"`
	Drop      bool    `json:"cache_drop,omitempty"`
}

var table = append(Common(ModeFB, ModeDeep, ModeStatic),
	Knob{Name: "min_guidance", Kind: Float, Min: 0, Max: 100, AtMost: "max_guidance", Help: "first", Group: Advanced},
	Knob{Name: "max_guidance", Kind: Float, Min: 0, Max: 100, Mesh: Guides, OpenAIAlso: []string{"guidance_scale"}, Help: "last", Group: Basic},
)

func TestTableFields(t *testing.T) {
	if err := table.CheckFields(&params{}); err != nil {
		t.Fatal(err)
	}
	bad := Table{{Name: "steps", Kind: Float, Help: "h", Group: Basic}}
	if err := bad.CheckFields(&params{}); err == nil || !strings.Contains(err.Error(), "cannot hold a float") {
		t.Fatalf("a float knob on an int field: %v", err)
	}
	if err := (Table{{Name: "nope", Kind: Int, Help: "h", Group: Basic}}).CheckFields(&params{}); err == nil {
		t.Fatal("a knob without a field was accepted")
	}
}

// DecodeJSON reads every value exactly or refuses it naming the knob; nothing is rounded,
// trimmed or taken twice.
func TestDecodeJSON(t *testing.T) {
	for _, c := range []struct {
		in    string
		want  func(*params)
		given []string
		err   string // substring of the error; "" for none
	}{
		{in: ``, want: func(*params) {}},
		{in: `{}`, want: func(*params) {}},
		{in: `{"steps": 8, "seed": 9223372036854775807}`, want: func(p *params) { p.Steps, p.Seed = 8, math.MaxInt64 }, given: []string{"steps", "seed"}},
		{in: `{"steps": null}`, want: func(*params) {}},
		{in: `{"cache": "deepcache", "cache_interval": 16777217}`, err: "cache_interval 16777217 must be in [2, 10000]"},
		{in: `{"cache_interval": 0}`, err: "cache_interval 0 must be in [2, 10000]"},
		{in: `{"cache_threshold": 0}`, err: "cache_threshold 0 must be in (0, 1000]"},
		{in: `{"steps": 1.5}`, err: `steps "1.5" must be an integer`},
		{in: `{"steps": 1e3}`, err: "steps \"1e3\" must be an integer"},
		{in: `{"steps": "8"}`, err: `steps "8" must be a JSON number`},
		{in: `{"seed": 9223372036854775808}`, err: "seed"},
		{in: `{"steps": 8, "steps": 9}`, err: `"steps" is given twice`},
		{in: `{"blend": " cosine"}`, err: `blend " cosine" must be one of cosine, linear`},
		{in: `{"stpes": 8}`, err: `unknown parameter "stpes" (did you mean steps?)`},
		{in: `{"guidance_scale": 8}`, err: `unknown parameter "guidance_scale"`},
		{in: `{"cache_steps": [0, 2, 2]}`, err: "steps must ascend"},
		{in: `{"cache_steps": [0, 1.5]}`, err: "1.5 is not a step"},
		{in: `{"cache_steps": [0, 3, 5]}`, want: func(p *params) { p.CSteps = []int{0, 3, 5} }, given: []string{"cache_steps"}},
		{in: `{"cache_drop": 1}`, err: "cache_drop 1 must be true or false"},
		{in: `{"steps": 8} {}`, err: "trailing data"},
		{in: `[1]`, err: "not a JSON object"},
		{in: `{"window": 0}`, err: "window 0 must be in [1, 1048576]"},
	} {
		var p params
		given, err := table.DecodeJSON([]byte(c.in), &p, nil)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !errors.Is(err, ErrParams) {
				t.Errorf("%s: error %v, want one with %q", c.in, err, c.err)
			}
			continue
		}
		var want params
		c.want(&want)
		if err != nil || !reflect.DeepEqual(p, want) || !reflect.DeepEqual(given.Names(table), c.given) {
			t.Errorf("%s: %+v %v, %v; want %+v %v", c.in, p, given.Names(table), err, want, c.given)
		}
	}
}

// SetText reads what a flag, a form or an OpenAI field gives, exactly.
func TestSetText(t *testing.T) {
	for _, c := range []struct {
		name, text string
		err        string
	}{
		{"steps", "8", ""},
		{"steps", " 8", `steps " 8" must be an integer`},
		{"steps", "0x10", "must be an integer"},
		{"max_guidance", "2.5", ""},
		{"max_guidance", "NaN", `max_guidance "NaN" must be a number`},
		{"max_guidance", "Inf", "must be a number"},
		{"max_guidance", "1_0", "must be a number"},
		{"max_guidance", "101", "max_guidance 101 must be in [0, 100]"},
		{"cache_steps", "0-2,5", ""},
		{"cache_steps", "5,0-2", ""},
		{"cache_steps", "0-99999", "more than the 10000 steps"},
		{"cache_steps", "", "no steps"},
		{"cache_drop", "true", ""},
		{"fps", "-5", "fps -5 must be in [1, 240]"},
		{"num_frames", "-1", "num_frames -1 must be in [1, 1048576]"},
	} {
		var p params
		g := Given{}
		err := table.SetText(&p, g, c.name, c.text)
		if c.err == "" {
			if err != nil || !g[c.name] {
				t.Errorf("%s=%q: %v, given %v", c.name, c.text, err, g)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.err) || g[c.name] {
			t.Errorf("%s=%q: %v, want one with %q", c.name, c.text, err, c.err)
		}
	}
	var p params
	if err := table.SetText(&p, nil, "cache_steps", "5,0-2"); err != nil || !reflect.DeepEqual(p.CSteps, []int{0, 1, 2, 5}) {
		t.Fatalf("cache_steps 5,0-2: %v %v", p.CSteps, err)
	}
	if s, _ := table.Text(&p, "cache_steps"); s != "0-2,5" {
		t.Fatalf("Text: %q", s)
	}
}

// Check refuses knobs that do not apply together and lets a ramp's first value follow its
// last down.
func TestCheck(t *testing.T) {
	for _, c := range []struct {
		in, err string
		want    func(*params)
	}{
		{in: `{"cache_threshold": 0.1}`, err: "cache_threshold applies to cache fbcache only, and no cache is set"},
		{in: `{"cache": "deepcache", "cache_threshold": 0.1}`, err: "cache_threshold applies to cache fbcache, not deepcache"},
		{in: `{"cache": "none", "cache_drop": true}`, err: "cache_drop applies to cache fbcache, deepcache or static only"},
		{in: `{"cache": "static", "cache_interval": 4}`},
		{in: `{"height": 64}`, err: "height without width"},
		{in: `{"min_guidance": 3, "max_guidance": 2}`, err: "min_guidance 3 is above max_guidance 2"},
		{in: `{"max_guidance": 1.5}`, want: func(p *params) { p.Min = 1.5 }},
	} {
		p := params{Min: 2, Max: 4}
		given, err := table.DecodeJSON([]byte(c.in), &p, nil)
		if err == nil {
			err = table.Check(&p, given)
		}
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
		}
		if c.want != nil {
			want := p
			c.want(&want)
			if !reflect.DeepEqual(p, want) {
				t.Errorf("%s: %+v, want %+v", c.in, p, want)
			}
		}
	}
}

func TestCheckMesh(t *testing.T) {
	latent := func(f int) int { return 1 + (f-1)/4 }
	for _, c := range []struct {
		p       params
		cfg, cp int
		err     string
	}{
		{p: params{Max: 3, NumFrames: 17}, cfg: 2, cp: 1},
		{p: params{Max: 1, NumFrames: 17}, cfg: 2, cp: 1, err: "an unguided job (--max-guidance at most 1) has none"},
		{p: params{Max: 1, NumFrames: 17}, cfg: 1, cp: 2},
		{p: params{NumFrames: 17, Window: 9}, cfg: 1, cp: 2, err: "a job cut into windows (17 frames over --window 9)"},
		{p: params{NumFrames: 17, Window: 9, Max: 3}, cfg: 2, cp: 1, err: "temporal windows run on pp x dp meshes only"},
		{p: params{NumFrames: 17, Window: 17, Max: 3}, cfg: 2, cp: 1},
		{p: params{NumFrames: 5}, cfg: 1, cp: 3, err: "--cp 3, but --num-frames 5 gives a latent of 2 frames"},
	} {
		err := table.CheckMesh(&c.p, c.cfg, c.cp, latent)
		got := ""
		if ke, ok := AsError(err); ok {
			got = ke.In(Flags)
		}
		if (c.err == "") != (err == nil) || !strings.Contains(got, c.err) {
			t.Errorf("%+v cfg %d cp %d: %q, want %q", c.p, c.cfg, c.cp, got, c.err)
		}
	}
}

// An error names its knobs in each surface's spelling.
func TestErrorSpelling(t *testing.T) {
	e := table.Errorf("steps", "{steps} %d exceeds {num_frames}; {nope_x} stays", 9)
	for s, want := range map[Spelling]string{
		JSON:   "steps 9 exceeds num_frames; nope_x stays",
		Flags:  "--steps 9 exceeds --num-frames; --nope-x stays",
		OpenAI: "num_inference_steps 9 exceeds num_frames; nope_x stays",
	} {
		if got := e.In(s); got != want {
			t.Errorf("spelling %d: %q, want %q", s, got, want)
		}
	}
	sentinel := errors.New("mine")
	if m := e.Mark(sentinel); !errors.Is(m, sentinel) || !errors.Is(m, ErrParams) || errors.Is(e, sentinel) {
		t.Fatal("Mark")
	}
}

// Union keeps one declaration per name and every family's choices.
func TestUnion(t *testing.T) {
	u := Union(Common(ModeFB), Common(ModeDeep))
	k, _ := u.Lookup(CacheKnob)
	if !reflect.DeepEqual(k.Choices, []string{ModeNone, ModeFB, ModeDeep}) {
		t.Fatalf("cache choices %v", k.Choices)
	}
	if !u.Has("cache_threshold") || !u.Has("cache_branch") || u.Has("cache_steps") {
		t.Fatalf("union %v", u.Names())
	}
}

// FuzzDecodeJSON: any body is refused with an *Error or decoded to values in range.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{`{"steps": 8}`, `{"cache":"deepcache","cache_interval":16777217}`, `{"a":1,"a":2}`,
		`{"cache_steps":[0,1,2]}`, `{"max_guidance":1e308}`, `{"seed":-0}`, `{"blend":"linear"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var p params
		given, err := table.DecodeJSON(data, &p, nil)
		if err != nil {
			if _, ok := AsError(err); !ok {
				t.Fatalf("%q: %v is not an *Error", data, err)
			}
			return
		}
		for name := range given {
			k, _ := table.Lookup(name)
			text, _ := table.Text(&p, name)
			var q params
			if err := table.SetText(&q, nil, name, text); err != nil {
				t.Fatalf("%q: %s=%s decoded but its text is refused: %v (%+v)", data, name, text, err, k)
			}
		}
	})
}

// A range up to the largest int ends (the loop once wrapped around forever) and a list is
// bounded: both are refused.
func TestParseStepsBounded(t *testing.T) {
	for _, s := range []string{"9223372036854775807", "0-9223372036854775807", "9223372036854775806-9223372036854775807", "0-1048576,5"} {
		if steps, err := ParseSteps(s); err == nil {
			t.Errorf("%q: %d steps, want a refusal", s, len(steps))
		}
	}
}

// The inputs are declared once: a model's needs fill them, each surface spells them from
// the declaration (the native part, the flag, the OpenAI field).
func TestInputs(t *testing.T) {
	in := AllInputs.Need(map[string]Need{"image": Required, "prompt": Optional})
	needs := map[string]Need{}
	for _, i := range in {
		needs[i.Name] = i.Need
	}
	if want := map[string]Need{"image": Required, "last_image": None, "prompt": Optional, "negative_prompt": None}; !reflect.DeepEqual(needs, want) {
		t.Fatalf("needs %v, want %v", needs, want)
	}
	if AllInputs[0].Need != "" {
		t.Fatal("Need changed the declaration")
	}
	if got := in.Taken().Names(); !reflect.DeepEqual(got, []string{"image", "prompt"}) {
		t.Errorf("taken %v", got)
	}
	if got := in.OfKind(ImageInput).Names(); !reflect.DeepEqual(got, []string{"image", "last_image"}) {
		t.Errorf("images %v", got)
	}
	last, _ := in.Lookup("last_image")
	img, _ := in.Lookup("image")
	for _, c := range []struct {
		in   Input
		s    Spelling
		want string
	}{{img, JSON, "image part"}, {img, Flags, "--image"}, {img, OpenAI, "input_reference"},
		{last, Flags, "--last-image"}, {last, OpenAI, "last_image part"}} {
		if got := c.in.Spell(c.s); got != c.want {
			t.Errorf("%s spelled %v: %q, want %q", c.in.Name, c.s, got, c.want)
		}
	}
	if got := AllInputs.OpenAINames(); !reflect.DeepEqual(got, []string{"input_reference", "prompt", "negative_prompt"}) {
		t.Errorf("OpenAI fields %v", got)
	}
	if _, ok := in.Lookup("params"); ok {
		t.Error("params is not an input")
	}
}
