package openai

import (
	"errors"
	"reflect"
	"testing"

	_ "github.com/vdpp/vdpp/model/families" // the synthetic model
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/knob"
	"github.com/vdpp/vdpp/serve/httpapi"
	"github.com/vdpp/vdpp/serve/job"
)

// familyModel is a family's model as the OpenAI API sees it: its defaults, description
// and checks.
type familyModel struct {
	desc  family.Description
	check func(family.Params) error
}

func (m familyModel) ParseParams(data []byte, lim job.Limits) (job.Params, error) {
	return job.ParseJob(data, m.desc, nil, m.check, lim)
}
func (m familyModel) ResolveParams(p job.Params, given knob.Given, lim job.Limits) (job.Params, error) {
	return job.Resolve(p, given, m.desc, m.check, lim)
}
func (m familyModel) Unknown(name string) string {
	f, _ := family.Lookup("synthetic")
	return family.Unknown(f)(name)
}
func (m familyModel) Description() family.Description { return m.desc }
func (m familyModel) TextConditioned() bool           { return m.desc.TextDim > 0 }

// syntheticModel is the synthetic family's model.
func syntheticModel(t testing.TB) httpapi.Model {
	t.Helper()
	r, err := family.Resolve("synthetic")
	if err != nil {
		t.Fatal(err)
	}
	desc, err := r.Describe()
	if err != nil {
		t.Fatal(err)
	}
	s, err := r.Open(family.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	desc.Defaults = s.DefaultParams()
	return familyModel{desc: desc, check: s.Validate}
}

func TestParams(t *testing.T) {
	lim := job.DefaultLimits()
	gen := syntheticModel(t)
	def := job.Params(gen.Description().Defaults)
	cases := []struct {
		name   string
		fields map[string]string
		want   func(p *job.Params)
		param  string // "" = no error
	}{
		{"defaults", map[string]string{}, func(p *job.Params) {}, ""},
		{"size", map[string]string{"size": "128x64"}, func(p *job.Params) { p.Width, p.Height = 128, 64 }, ""},
		{"seconds at the default fps", map[string]string{"seconds": "2"}, func(p *job.Params) { p.NumFrames = 14 }, ""},
		{"seconds rounds", map[string]string{"seconds": "1.1", "fps": "10"}, func(p *job.Params) { p.NumFrames, p.FPS = 11, 10 }, ""},
		{"seconds with an underscore", map[string]string{"seconds": "1_0"}, nil, "seconds"},
		{"seconds in hex", map[string]string{"seconds": "0x1p3"}, nil, "seconds"},
		{"tiny seconds is one frame", map[string]string{"seconds": "0.01"}, func(p *job.Params) { p.NumFrames = 1 }, ""},
		{"num_frames and seconds", map[string]string{"seconds": "3", "num_frames": "5"}, nil, "seconds"},
		{"guidance below the default min", map[string]string{"guidance_scale": "0.5"}, func(p *job.Params) { p.MinGuidance, p.MaxGuidance = 0.5, 0.5 }, ""},
		{"guidance above", map[string]string{"guidance_scale": "5"}, func(p *job.Params) { p.MaxGuidance = 5 }, ""},
		{"explicit min", map[string]string{"guidance_scale": "5", "min_guidance": "2"}, func(p *job.Params) { p.MinGuidance, p.MaxGuidance = 2, 5 }, ""},
		{"native extras", map[string]string{"seed": "9", "num_inference_steps": "7", "min_guidance": "0.5"},
			func(p *job.Params) { p.Seed, p.Steps, p.MinGuidance = 9, 7, 0.5 }, ""},
		{"another family's knob", map[string]string{"motion_bucket_id": "30"}, nil, "motion_bucket_id"},
		{"unknown field", map[string]string{"steps_count": "30"}, nil, "steps_count"},
		{"a knob twice", map[string]string{"guidance_scale": "2", "max_guidance": "3"}, nil, "max_guidance"},
		{"negative prompt is accepted", map[string]string{"negative_prompt": "blur"}, func(p *job.Params) {}, ""},
		{"size with spaces", map[string]string{"size": " 64x64 "}, nil, "size"},
		{"size and height", map[string]string{"size": "64x64", "height": "32"}, nil, "height"},
		{"width and height", map[string]string{"width": "128", "height": "32"}, func(p *job.Params) { p.Width, p.Height = 128, 32 }, ""},
		{"width alone", map[string]string{"width": "128"}, nil, "width"},
		{"n 1", map[string]string{"n": "1"}, func(p *job.Params) {}, ""},
		{"n 2", map[string]string{"n": "2"}, nil, "n"},
		{"width not a multiple", map[string]string{"width": "65", "height": "64"}, nil, "width"},
		{"size 0", map[string]string{"size": "0x64"}, nil, "size"},
		{"size over", map[string]string{"size": "2048x64"}, nil, "size"},
		{"size letters", map[string]string{"size": "wide"}, nil, "size"},
		{"fps 0", map[string]string{"fps": "0"}, nil, "fps"},
		{"frames over", map[string]string{"num_frames": "26"}, nil, "num_frames"},
		{"seconds over", map[string]string{"seconds": "4"}, nil, "seconds"},
		{"seconds NaN", map[string]string{"seconds": "NaN"}, nil, "seconds"},
		{"steps float", map[string]string{"num_inference_steps": "2.5"}, nil, "num_inference_steps"},
		{"steps 0", map[string]string{"num_inference_steps": "0"}, nil, "num_inference_steps"},
		{"guidance inf", map[string]string{"guidance_scale": "Inf"}, nil, "guidance_scale"},
		{"long video", map[string]string{"num_frames": "20"}, func(p *job.Params) { p.NumFrames, p.Window, p.Overlap, p.Blend = 20, 14, 3, "cosine" }, ""},
		{"long video windows", map[string]string{"num_frames": "20", "window": "8", "overlap": "2", "blend": "linear"},
			func(p *job.Params) { p.NumFrames, p.Window, p.Overlap, p.Blend = 20, 8, 2, "linear" }, ""},
		{"overlap not shorter than the window", map[string]string{"num_frames": "20", "window": "8", "overlap": "8"}, nil, "overlap"},
		{"window too long", map[string]string{"num_frames": "25", "window": "20"}, nil, "window"},
		{"too few frames for the window", map[string]string{"num_frames": "6", "window": "8"}, nil, "window"},
		{"unknown blend", map[string]string{"num_frames": "20", "blend": "step"}, nil, "blend"},
		{"step cache", map[string]string{"cache": "fbcache", "cache_threshold": "0.1"}, func(p *job.Params) { p.Cache.Mode, p.Cache.Threshold = "fbcache", 0.1 }, ""},
		{"static cache steps", map[string]string{"cache": "static", "cache_steps": "0-2,5"}, func(p *job.Params) { p.Cache.Mode, p.Cache.Steps = "static", []int{0, 1, 2, 5} }, ""},
		{"cache steps malformed", map[string]string{"cache": "static", "cache_steps": "0,x"}, nil, "cache_steps"},
		{"cache interval float", map[string]string{"cache": "static", "cache_interval": "2.5"}, nil, "cache_interval"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Params(gen, tc.fields, lim)
			if tc.param != "" {
				var oe *openAIError
				if !errors.As(err, &oe) || oe.Param == nil || *oe.Param != tc.param || oe.Status != 400 {
					t.Fatalf("error %v, want one on param %q", err, tc.param)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := def
			tc.want(&want)
			if !reflect.DeepEqual(p, want) {
				t.Fatalf("got %+v\nwant %+v", p, want)
			}
		})
	}
}

// FuzzOpenAICreate feeds arbitrary bodies to both create parsers and the parameter
// mapping: they must answer an error or valid Params, never panic.
func FuzzOpenAICreate(f *testing.F) {
	f.Add([]byte(`{"model":"m","prompt":"p","seconds":"4","size":"64x64","input_reference":{"image_url":"data:image/png;base64,AAAA"}}`), "x")
	f.Add([]byte("--x\r\nContent-Disposition: form-data; name=\"seconds\"\r\n\r\n2\r\n--x--\r\n"), "x")
	f.Add([]byte("--x\r\nContent-Disposition: form-data; name=\"input_reference\"; filename=\"a.png\"\r\n\r\nPNG\r\n--x--\r\n"), "x")
	f.Add([]byte(`{"size":"8x8","num_frames":1e9}`), "b")
	lim := job.DefaultLimits()
	f.Fuzz(func(t *testing.T, body []byte, boundary string) {
		for _, parse := range []func() (openAIRequest, error){
			func() (openAIRequest, error) { return parseOpenAIJSON(body) },
			func() (openAIRequest, error) { return parseOpenAIMultipart(body, boundary) },
		} {
			req, err := parse()
			if err != nil {
				var oe *openAIError
				if !errors.As(err, &oe) || oe.Status != 400 {
					t.Fatalf("parse error %v is not an OpenAI 400", err)
				}
				continue
			}
			p, err := Params(syntheticModel(t), req.Fields, lim)
			if err == nil {
				if verr := p.CheckLimits(lim, nil); verr != nil {
					t.Fatalf("OpenAIParams gave invalid %+v: %v", p, verr)
				}
			}
		}
	})
}
