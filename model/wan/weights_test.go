package wan_test

import (
	"testing"

	"github.com/vdpp/vdpp/internal/shared"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/wan"
	"github.com/vdpp/vdpp/model/wan/wantest"
	"github.com/vdpp/vdpp/plan"
)

// TestWeightsMatchLoaded: the sizes by role the planner gets from the configs are the
// bytes the loaded networks hold, for both experts, the VAE and the text encoder; the plan
// weights carry the experts with their switch.
func TestWeightsMatchLoaded(t *testing.T) {
	dir := shared.Require(t, "golden", "wan-dev")
	r, err := family.ResolveDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	o := family.Options{Roles: family.AllRoles}
	w, err := r.Family.(family.Weigher).Weights(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	s, err := wan.Load(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got := s.WeightBytes()
	if len(w.Denoisers) != 2 || w.Denoisers[0] != got[wan.Transformer] || w.Denoisers[1] != got[wan.Transformer2] ||
		w.Decode != got[wan.VAE] || w.Condition != 0 {
		t.Errorf("sized %+v, loaded %v", w, got)
	}
	pw, err := plan.FamilyWeights(r, o, 8, s)
	if err != nil {
		t.Fatal(err)
	}
	if len(pw.Experts) != 2 || len(pw.ExpertSwitches) != 1 || pw.Denoiser != w.Denoisers[0]+w.Denoisers[1] || pw.Decode != w.Decode {
		t.Errorf("plan weights %+v from %+v", pw, w)
	}

	pdir := wantest.PromptFolder(t)
	o.Prompts = true
	if w, err = r.Family.(family.Weigher).Weights(pdir, o); err != nil {
		t.Fatal(err)
	}
	ps, err := wan.Load(pdir, o)
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	if text := ps.WeightBytes()[wan.TextEncoder]; w.Condition != text || text == 0 {
		t.Errorf("text encoder sized %d, loaded %d", w.Condition, text)
	}
}
