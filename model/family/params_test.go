package family_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	_ "github.com/vdpp/vdpp/model/families"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/knob"
	"github.com/vdpp/vdpp/pipeline"
)

// Every family's knob table names Params fields of the right type, and every Params field
// is a knob of some family (but the LoRAs: files, which each command and the server check
// against the model, not values of a range): a knob is one field and one table entry, never
// half of one.
func TestKnobTables(t *testing.T) {
	var all []knob.Table
	for _, name := range family.FamilyNames() {
		f, _ := family.Lookup(name)
		tab := f.Knobs()
		if err := tab.CheckFields(&family.Params{}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		for _, want := range knob.Common().Names() {
			if !tab.Has(want) {
				t.Errorf("%s lacks the common knob %s", name, want)
			}
		}
		all = append(all, tab)
	}
	union := knob.Union(all...)
	for _, f := range reflect.VisibleFields(reflect.TypeFor[family.Params]()) {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous || name == "" || name == "lora" || name == "lora_2" {
			continue
		}
		if !union.Has(name) {
			t.Errorf("Params.%s (%q) is in no family's knob table", f.Name, name)
		}
	}
	// The cache modes the tables offer are the pipeline's.
	if got := []string{knob.ModeNone, knob.ModeFB, knob.ModeDeep, knob.ModeStatic}; !slices.Equal(got, pipeline.CacheModes) {
		t.Errorf("knob's cache modes %v, pipeline's %v", got, pipeline.CacheModes)
	}
}

// Each family-specific knob is read by the families whose table has it, and a knob set for
// a family that does not read it is refused naming the families it belongs to.
func TestReadsAndRefuseUnread(t *testing.T) {
	for param, want := range map[string]string{
		"guidance_scale": "wan", "max_guidance": "dummy svd synthetic", "motion_bucket_id": "svd", "num_frames": "dummy svd synthetic wan",
	} {
		if got := strings.Join(family.ReadersOf(param), " "); got != want {
			t.Errorf("ReadersOf(%q) = %q, want %q", param, got, want)
		}
	}
	synthetic, _ := family.Lookup("synthetic")
	knobs := []family.Knob{{Flag: "max-guidance", Param: "max_guidance", Set: true}, {Flag: "guidance-scale", Param: "guidance_scale", Set: false}}
	if err := family.RefuseUnread(synthetic, "synthetic", knobs); err != nil {
		t.Fatalf("synthetic refused what it reads or what was not set: %v", err)
	}
	knobs[1].Set = true
	err := family.RefuseUnread(synthetic, "synthetic", knobs)
	if want := "--guidance-scale applies to wan models; --model synthetic is in the synthetic family, which does not read it (its own: --max-guidance)"; err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
	wan, _ := family.Lookup("wan")
	err = family.RefuseGiven(wan, "wan-dev", family.AllKnobs(), knob.Given{"motion_bucket_id": true, "steps": true})
	if err == nil || !strings.Contains(err.Error(), "--motion-bucket-id applies to svd models; --model wan-dev is in the wan family, which does not read it (its own: --guidance-scale --guidance-scale-2)") {
		t.Fatalf("got %v", err)
	}
	if got := family.Unknown(wan)("max_guidance"); got != "applies to dummy, svd or synthetic models; this model is in the wan family, which does not read it" {
		t.Fatalf("Unknown: %q", got)
	}
}

// A model's inputs are the knob table's declared inputs with the needs its description
// says: an image model's image; a text-to-video model's prompt (and optional negative
// prompt); an image-to-video model with a prompt both; a first-last-frame model its last
// image too.
func TestDescriptionInputs(t *testing.T) {
	for _, c := range []struct {
		name string
		d    family.Description
		want map[string]knob.Need
	}{
		{"image model", family.Description{}, map[string]knob.Need{"image": knob.Required}},
		{"text-to-video", family.Description{TextDim: 8}, map[string]knob.Need{"prompt": knob.Required, "negative_prompt": knob.Optional}},
		{"image-to-video with a prompt", family.Description{TextDim: 8, Image: family.NeedRequired},
			map[string]knob.Need{"image": knob.Required, "prompt": knob.Required, "negative_prompt": knob.Optional}},
		{"first-last-frame", family.Description{TextDim: 8, Image: family.NeedRequired, LastImage: family.NeedRequired},
			map[string]knob.Need{"image": knob.Required, "last_image": knob.Required, "prompt": knob.Required, "negative_prompt": knob.Optional}},
		{"optional last image", family.Description{TextDim: 8, Image: family.NeedRequired, LastImage: family.NeedOptional},
			map[string]knob.Need{"image": knob.Required, "last_image": knob.Optional, "prompt": knob.Required, "negative_prompt": knob.Optional}},
	} {
		got := map[string]knob.Need{}
		for _, in := range c.d.Inputs().Taken() {
			got[in.Name] = in.Need
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: inputs %v, want %v", c.name, got, c.want)
		}
		if len(c.d.Inputs()) != len(knob.AllInputs) {
			t.Errorf("%s: %d inputs, want every declared one (%d), the ones it takes none of as none", c.name, len(c.d.Inputs()), len(knob.AllInputs))
		}
	}
}
