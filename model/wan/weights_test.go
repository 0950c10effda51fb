package wan_test

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/vdpp/vdpp/internal/goldentest"
	"github.com/vdpp/vdpp/internal/shared"
	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/wan"
	"github.com/vdpp/vdpp/model/wan/wantest"
	"github.com/vdpp/vdpp/plan"
	"github.com/vdpp/vdpp/tensor"
	"github.com/vdpp/vdpp/tensor/quant"
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

// TestWeightTypesMatchLoaded: with --weights-dtype q8_0, with a q8_0 GGUF as the low-noise
// expert, and with that file converted to bf16, the planner's bytes by type are what the
// loaded experts hold; on the CPU kernels and on a backend without them (go:kernels=off,
// as XLA: bf16 held, q8_0 widened to f32).
func TestWeightTypesMatchLoaded(t *testing.T) {
	dir := shared.Require(t, "golden", "wan-dev")
	gg := filepath.Join(t.TempDir(), "low.gguf")
	wantest.WriteTransformerFile(t, goldentest.ReadTensors(t, filepath.Join(dir, "transformer_2", "diffusion_pytorch_model.safetensors")), gg, wantest.SDCppGGUF, quant.Q8_0)
	r, err := family.ResolveDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		backend string
		wo      family.WeightOptions
		want    string // a type some weights are held in
	}{
		{"go", family.WeightOptions{DType: "q8_0"}, "q8_0"},
		{"go", family.WeightOptions{Transformer2: gg}, "q8_0"},
		{"go", family.WeightOptions{DType: "bf16", Transformer2: gg}, "bf16"},
		{"go:kernels=off", family.WeightOptions{DType: "q8_0"}, "f32"},
		{"go:kernels=off", family.WeightOptions{Transformer2: gg}, "f32"},
		{"go:kernels=off", family.WeightOptions{DType: "bf16", Transformer2: gg}, "bf16"},
	} {
		wo := tc.wo
		o := family.Options{Backend: tc.backend, Roles: family.Roles{Denoise: true}, Weights: wo}
		w, err := r.Family.(family.Weigher).Weights(dir, o)
		if err != nil {
			t.Fatal(err)
		}
		s, err := wan.Load(dir, o)
		if err != nil {
			t.Fatal(err)
		}
		got := s.WeightTypes()
		s.Close()
		t.Logf("%s %+v: held %v", tc.backend, wo, got)
		if !reflect.DeepEqual(got, w.Types) && !reflect.DeepEqual(withoutDecode(w), got) {
			t.Errorf("%s %+v: sized %v, loaded %v", tc.backend, wo, w.Types, got)
		}
		if got[tc.want] == 0 {
			t.Errorf("%s %+v: nothing held in %s: %v", tc.backend, wo, tc.want, got)
		}
		if tc.backend == "go:kernels=off" && got["q8_0"] != 0 {
			t.Errorf("%s %+v: %d bytes held in q8_0 without the kernels", tc.backend, wo, got["q8_0"])
		}
	}
}

// withoutDecode is w's bytes by type without the VAE (float32), which a denoise-only
// process does not load.
func withoutDecode(w family.Weights) map[string]int64 {
	out := map[string]int64{}
	for k, v := range w.Types {
		out[k] = v
	}
	out["f32"] -= w.Decode + w.Condition
	if out["f32"] == 0 {
		delete(out, "f32")
	}
	return out
}
