package job

import (
	"errors"
	"reflect"
	"testing"
)

// svdDefaults are Stable Video Diffusion's defaults, the base the tests parse over.
var svdDefaults = Params{NumFrames: 14, Steps: 25, Height: 576, Width: 1024, MinGuidance: 1, MaxGuidance: 3,
	FPS: 7, MotionBucketID: 127, NoiseAugStrength: 0.02}

func TestParseParams(t *testing.T) {
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
		{"unguided", `{"max_guidance":1}`, nil, func(p Params) bool { return !p.Guided() }},
		{"malformed", `{"steps":`, ErrBadParams, nil},
		{"not an object", `[1,2]`, ErrBadParams, nil},
		{"null is an object of defaults", `null`, nil, func(p Params) bool { return reflect.DeepEqual(p, svdDefaults) }},
		{"string for int", `{"steps":"8"}`, ErrBadParams, nil},
		{"float for int", `{"steps":8.5}`, ErrBadParams, nil},
		{"unknown field", `{"guidance":2}`, ErrBadParams, nil},
		{"trailing", `{} x`, ErrBadParams, nil},
		{"zero steps", `{"steps":0}`, ErrBadParams, nil},
		{"odd height", `{"height":100}`, ErrBadParams, nil},
		{"negative guidance", `{"min_guidance":-1}`, ErrBadParams, nil},
		{"huge fps", `{"fps":1000}`, ErrBadParams, nil},
		{"motion bucket", `{"motion_bucket_id":5000}`, ErrBadParams, nil},
		{"noise aug", `{"noise_aug_strength":11}`, ErrBadParams, nil},
		{"negative chunk", `{"decode_chunk_size":-2}`, ErrBadParams, nil},
		{"frames over limit", `{"num_frames":26}`, ErrTooLarge, nil},
		{"steps over limit", `{"steps":51}`, ErrTooLarge, nil},
		{"resolution over limit", `{"width":1032}`, ErrTooLarge, nil},
		{"int overflow", `{"steps":99999999999999999999}`, ErrBadParams, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := ParseParams([]byte(c.in), svdDefaults, lim)
			if c.want != nil {
				if !errors.Is(err, c.want) {
					t.Fatalf("err %v, want %v", err, c.want)
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

// FuzzParseParams: the parser never panics, and what it accepts is valid and round-trips.
func FuzzParseParams(f *testing.F) {
	for _, s := range []string{"", "{}", `{"steps":4}`, `{"num_frames":2,"height":16,"width":16,"seed":3}`, `{"steps":`, `[]`, `{"fps":1e309}`, "null"} {
		f.Add([]byte(s))
	}
	lim := DefaultLimits()
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseParams(data, svdDefaults, lim)
		if err != nil {
			if !errors.Is(err, ErrBadParams) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("unexpected error class: %v", err)
			}
			return
		}
		if err := p.Validate(lim); err != nil {
			t.Fatalf("accepted params fail validation: %v", err)
		}
		if p.Height%8 != 0 || p.Width%8 != 0 || p.Steps < 1 || p.Steps > lim.MaxSteps {
			t.Fatalf("accepted %+v", p)
		}
	})
}
