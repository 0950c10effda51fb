package job

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/knob"
)

// svdDefaults are Stable Video Diffusion's defaults, the base the tests parse over.
var svdDefaults = Params{NumFrames: 14, Steps: 25, Height: 576, Width: 1024, MinGuidance: 1, MaxGuidance: 3,
	FPS: 7, MotionBucketID: 127, NoiseAugStrength: 0.02}

// svdLike is a model described as SVD's folders are: its knobs (the common ones and an
// image-to-video family's), sizes multiples of 8, 14 native frames.
var svdLike = family.Description{Defaults: family.Params(svdDefaults), SizeMultiple: 8,
	Knobs: append(knob.Common(knob.ModeDeep, knob.ModeFB, knob.ModeStatic),
		knob.Knob{Name: "min_guidance", Kind: knob.Float, Min: 0, Max: 100, AtMost: "max_guidance", Help: "h", Group: knob.Advanced},
		knob.Knob{Name: "max_guidance", Kind: knob.Float, Min: 0, Max: 100, Mesh: knob.Guides, Help: "h", Group: knob.Basic},
		knob.Knob{Name: "motion_bucket_id", Kind: knob.Int, Min: 0, Max: 1023, Help: "h", Group: knob.Advanced},
		knob.Knob{Name: "noise_aug_strength", Kind: knob.Float, Min: 0, Max: 10, Help: "h", Group: knob.Advanced},
		knob.Knob{Name: "decode_chunk_size", Kind: knob.Int, Min: 0, Max: knob.MaxFrames, Help: "h", Group: knob.Advanced})}

// checkSize is a family's check of its folder: sizes multiples of 8.
func checkSize(p family.Params) error {
	if p.Height%8 != 0 || p.Width%8 != 0 {
		return svdLike.Knobs.Errorf("width", "{width} %d and {height} %d must be multiples of 8", p.Width, p.Height)
	}
	return nil
}

func TestParseJob(t *testing.T) {
	lim := Limits{MaxFrames: 25, MaxResolution: 1024, MaxSteps: 50}
	cases := []struct {
		name string
		in   string
		want error
		chk  func(Params) bool
	}{
		{"empty means defaults", "", nil, func(p Params) bool { return reflect.DeepEqual(p, svdDefaults) }},
		{"whitespace means defaults", " \n", nil, func(p Params) bool { return reflect.DeepEqual(p, svdDefaults) }},
		{"overrides", `{"num_frames":4,"steps":8,"height":64,"width":128,"seed":9,"fps":12}`, nil, func(p Params) bool {
			return p.NumFrames == 4 && p.Steps == 8 && p.Height == 64 && p.Width == 128 && p.Seed == 9 && p.FPS == 12 && p.MaxGuidance == 3
		}},
		{"unguided", `{"max_guidance":1}`, nil, func(p Params) bool { return !svdLike.Guided(family.Params(p)) && p.MinGuidance == 1 }},
		{"guidance follows down", `{"max_guidance":0.5}`, nil, func(p Params) bool { return p.MinGuidance == 0.5 }},
		{"malformed", `{"steps":`, ErrBadParams, nil},
		{"not an object", `[1,2]`, ErrBadParams, nil},
		{"null", `null`, ErrBadParams, nil},
		{"string for int", `{"steps":"8"}`, ErrBadParams, nil},
		{"float for int", `{"steps":8.5}`, ErrBadParams, nil},
		{"unknown field", `{"guidance":2}`, ErrBadParams, nil},
		{"another family's", `{"guidance_scale":2}`, ErrBadParams, nil},
		{"twice", `{"steps":2,"steps":3}`, ErrBadParams, nil},
		{"trailing", `{} x`, ErrBadParams, nil},
		{"zero steps", `{"steps":0}`, ErrBadParams, nil},
		{"odd height", `{"height":100,"width":64}`, ErrBadParams, nil},
		{"height alone", `{"height":64}`, ErrBadParams, nil},
		{"negative guidance", `{"min_guidance":-1}`, ErrBadParams, nil},
		{"huge fps", `{"fps":1000}`, ErrBadParams, nil},
		{"motion bucket", `{"motion_bucket_id":5000}`, ErrBadParams, nil},
		{"noise aug", `{"noise_aug_strength":11}`, ErrBadParams, nil},
		{"negative chunk", `{"decode_chunk_size":-2}`, ErrBadParams, nil},
		{"zero window", `{"window":0}`, ErrBadParams, nil},
		{"zero cache interval", `{"cache":"deepcache","cache_interval":0}`, ErrBadParams, nil},
		{"another mode's field", `{"cache":"deepcache","cache_threshold":0.1}`, ErrBadParams, nil},
		{"frames over limit", `{"num_frames":26}`, ErrTooLarge, nil},
		{"steps over limit", `{"steps":51}`, ErrTooLarge, nil},
		{"resolution over limit", `{"width":1032,"height":64}`, ErrTooLarge, nil},
		{"int overflow", `{"steps":99999999999999999999}`, ErrBadParams, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := ParseJob([]byte(c.in), svdLike, nil, checkSize, lim)
			if c.want != nil {
				if !errors.Is(err, c.want) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("err %v, want %v", err, c.want)
				}
				if _, ok := knob.AsError(err); !ok {
					t.Fatalf("err %v names no knob", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !c.chk(p) {
				t.Fatalf("parsed %+v", p)
			}
		})
	}
}

// FuzzParseJob: the parser never panics, and what it accepts is in range and round-trips.
func FuzzParseJob(f *testing.F) {
	for _, s := range []string{"", "{}", `{"steps":4}`, `{"num_frames":2,"height":16,"width":16,"seed":3}`, `{"steps":`, `[]`, `{"fps":1e309}`, "null",
		`{"cache":"deepcache","cache_interval":16777217}`, `{"num_frames":60,"window":14,"overlap":3}`} {
		f.Add([]byte(s))
	}
	lim := DefaultLimits()
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseJob(data, svdLike, nil, checkSize, lim)
		if err != nil {
			if !errors.Is(err, ErrBadParams) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("unexpected error class: %v", err)
			}
			return
		}
		if err := p.CheckLimits(lim, svdLike.Knobs); err != nil {
			t.Fatalf("accepted params over the limits: %v", err)
		}
		if p.Height%8 != 0 || p.Width%8 != 0 || p.Steps < 1 || p.Steps > lim.MaxSteps || p.FPS < 1 || p.Cache.Interval > knob.MaxSteps {
			t.Fatalf("accepted %+v", p)
		}
	})
}
