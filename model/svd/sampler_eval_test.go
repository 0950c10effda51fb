package svd_test

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/vdpp/vdpp/builtin"
	"github.com/vdpp/vdpp/data/procedural"
	_ "github.com/vdpp/vdpp/model/families" // builtin answers family.Open
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/svd"
	"github.com/vdpp/vdpp/model/svd/unet"
	"github.com/vdpp/vdpp/tensor"
)

// openBuiltin opens the built-in model (every role) through model/family.
func openBuiltin(t *testing.T) *svd.Sampler {
	t.Helper()
	fs, err := family.Open(builtin.Name, family.Options{Backend: "go", Roles: family.AllRoles})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close() })
	return fs.(*svd.Sampler)
}

// firstStep runs step 0 of a 2-step generation from frame 0 of held-out clip 0 and
// returns the latent after it.
func firstStep(t *testing.T, s family.Sampler) *tensor.Dense {
	t.Helper()
	ctx := context.Background()
	pr := s.DefaultParams()
	pr.Steps = 2
	sc, err := s.Scheduler(pr)
	if err != nil {
		t.Fatal(err)
	}
	frames := procedural.Video(procedural.ConfigFor(procedural.DefaultRule), 1, procedural.HeldOut, 0)
	it, err := s.Prepare(ctx, family.Input{Image: frames[0]}, pr, sc, []int64{0})
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.Stepper(sc)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Step(ctx, it); err != nil {
		t.Fatal(err)
	}
	return it.Latent
}

// TestEvalCapabilities checks eval's optional family interfaces on the built-in model,
// loaded once for both.
func TestEvalCapabilities(t *testing.T) {
	s := openBuiltin(t)
	t.Run("WithDenoiserWeights", func(t *testing.T) { testWithDenoiserWeights(t, s) })
	t.Run("Reconstruct", func(t *testing.T) { testReconstruct(t, s) })
}

// testWithDenoiserWeights: the reinitialised Sampler asks for exactly the UNet's tensors,
// steps differently from the trained one, and closing it leaves the trained one usable.
func testWithDenoiserWeights(t *testing.T, s *svd.Sampler) {
	want, err := unet.ExpectedTensors(s.P.UNetConfig)
	if err != nil {
		t.Fatal(err)
	}
	trained := firstStep(t, s)
	var asked map[string][]int
	u, err := s.WithDenoiserWeights(func(shapes map[string][]int) map[string]*tensor.Dense {
		asked = shapes
		out := make(map[string]*tensor.Dense, len(shapes))
		for name, shape := range shapes {
			out[name] = tensor.New(shape...) // all zero: the UNet predicts 0
		}
		return out
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(asked) != len(want) {
		t.Errorf("init asked for %d tensors, the UNet has %d", len(asked), len(want))
	}
	for name, shape := range want {
		if !slices.Equal(asked[name], shape) {
			t.Errorf("init asked %s as %v, want %v", name, asked[name], shape)
		}
	}
	if zero := firstStep(t, u); slices.Equal(zero.Data, trained.Data) {
		t.Error("the reinitialised UNet stepped exactly as the trained one")
	}
	if err := u.Close(); err != nil {
		t.Fatal(err)
	}
	if again := firstStep(t, s); !slices.Equal(again.Data, trained.Data) {
		t.Error("the trained Sampler changed after the reinitialised one was closed")
	}
}

// testReconstruct: the VAE round trip of a held-out clip's first frames keeps its shape, stays in
// [0, 1] and is close to the clip (the built-in VAE scores about 29 dB; 20 is the floor).
func testReconstruct(t *testing.T, s *svd.Sampler) {
	dc := procedural.ConfigFor(procedural.DefaultRule)
	truth := procedural.ToTensor(procedural.Video(dc, 1, procedural.HeldOut, 0)[:2]) // 2 frames keep it fast
	for i, v := range truth.Data {
		truth.Data[i] = (v + 1) / 2
	}
	got, err := s.Reconstruct(context.Background(), truth, s.DefaultParams())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Shape, truth.Shape) {
		t.Fatalf("shape %v, want %v", got.Shape, truth.Shape)
	}
	var se float64
	for i, v := range got.Data {
		if v < 0 || v > 1 {
			t.Fatalf("value %v outside [0, 1]", v)
		}
		d := float64(v - truth.Data[i])
		se += d * d
	}
	if psnr := -10 * math.Log10(se/float64(len(got.Data))); psnr < 20 {
		t.Errorf("round trip PSNR %.2f dB, want >= 20", psnr)
	}
}
