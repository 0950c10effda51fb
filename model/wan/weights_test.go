package wan_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/vdpp/vdpp/internal/shared"
	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/wan"
	"github.com/vdpp/vdpp/model/wan/wantest"
	"github.com/vdpp/vdpp/plan"
	"github.com/vdpp/vdpp/tensor"
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

// The image conditioner is sized as it loads: the first stage of an image-to-video folder
// holds the image encoder's layers it runs and the VAE, and its conditioning weights are
// those; the random conditioning a benchmark draws runs the experts.
func TestI2VWeightsAndRandomConditioning(t *testing.T) {
	for _, name := range []string{"wan21-i2v", "wan21-flf2v", "wan22-i2v-a14b", "wan22-ti2v"} {
		t.Run(name, func(t *testing.T) {
			dir := i2vFolder(t, name)
			r, err := family.ResolveDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			w, err := r.Family.(family.Weigher).Weights(dir, family.Options{})
			if err != nil {
				t.Fatal(err)
			}
			s, err := wan.Load(dir, family.Options{Roles: family.Roles{Condition: true}})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			got := s.WeightBytes()
			if w.Condition != got[wan.ImageEncoder]+got[wan.VAE] || got[wan.VAE] == 0 || (name[:5] == "wan21") != (got[wan.ImageEncoder] > 0) {
				t.Errorf("conditioner sized %d, loaded %v", w.Condition, got)
			}
			full, err := wan.Load(dir, family.Options{Roles: family.AllRoles})
			if err != nil {
				t.Fatal(err)
			}
			defer full.Close()
			p := family.Params{NumFrames: 5, Steps: 2, Height: 32, Width: 64, GuidanceScale: 1}
			latent := full.LatentShape(p)
			st, err := full.Stepper(nil)
			if err != nil {
				t.Fatal(err)
			}
			c := full.RandomConditioning(rand.New(rand.NewPCG(1, 1)), latent)
			x := tensor.New(append([]int{1}, latent...)...)
			if _, err := st.Model.Predict(context.Background(), model.Input{Latents: x, Timestep: 500, Cond: []model.Conditioning{c}, Uncond: []bool{false}}); err != nil {
				t.Fatalf("the random conditioning does not run the model: %v", err)
			}
		})
	}
}
