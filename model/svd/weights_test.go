package svd

import (
	"testing"

	"github.com/vdpp/vdpp/internal/shared"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/plan"
)

// TestWeightsMatchLoaded: the sizes by role the planner gets from the configs are the
// bytes the loaded networks hold: image encoder and VAE encoder condition, the UNet
// denoises, the VAE decoder decodes.
func TestWeightsMatchLoaded(t *testing.T) {
	dir := shared.Require(t, "golden", "dev")
	w, err := svdFamily{}.Weights(dir, family.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := nn.NewBackend("go")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Load(dir, "", b, AllParts)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	got := p.WeightBytes()
	if len(w.Denoisers) != 1 || w.Denoisers[0] != got["unet"] || w.Condition != got["image_encoder"]+got["vae_encoder"] ||
		w.Decode != got["vae_decoder"] || w.Decode == 0 {
		t.Errorf("sized %+v, loaded %v", w, got)
	}
	pw, err := plan.FamilyWeights(family.Resolved{Family: svdFamily{}, Dir: dir}, family.Options{}, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	if pw.Denoiser != got["unet"] || pw.Condition != w.Condition || pw.Decode != w.Decode || pw.Experts != nil {
		t.Errorf("plan weights %+v", pw)
	}
}
