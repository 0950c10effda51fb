package vae

import (
	"path/filepath"
	"sync"
	"testing"

	"github.com/gomlx/gomlx/backends"

	"github.com/vdpp/vdpp/internal/shared"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/tensor"
)

// parityTol is the relative L2 error every reference tensor must meet (fp32 reference).
const parityTol = 1e-4

var testBackend = sync.OnceValues(func() (backends.Backend, error) { return nn.NewBackend("go") })

func backend(t testing.TB) backends.Backend {
	t.Helper()
	b, err := testBackend()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func load(t testing.TB, dir string) *VAE {
	t.Helper()
	v, err := Load(dir, "", backend(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = v.Close() })
	return v
}

func checkErrors(t *testing.T, res []TensorError, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range res {
		t.Logf("%s %v: rel L2 %.3g, max abs %.3g", e.Name, e.Shape, e.RelL2, e.MaxAbs)
		if !(e.RelL2 <= parityTol) {
			t.Errorf("%s: rel L2 %.3g > %g", e.Name, e.RelL2, parityTol)
		}
	}
}

// The shared wan-dev golden cases (diffusers v0.35.2, the Wan 2.1 VAE of the dev folder).
func TestGoldenEncode(t *testing.T) {
	dir := shared.Require(t, "golden", "wan-dev")
	v := load(t, filepath.Join(dir, "vae"))
	res, err := EncodeCase(v, filepath.Join(dir, "cases", "vae_encode"))
	checkErrors(t, res, err)
	if len(res) != 4 {
		t.Errorf("compared %d tensors, the case has 4", len(res))
	}
}

func TestGoldenDecode(t *testing.T) {
	dir := shared.Require(t, "golden", "wan-dev")
	v := load(t, filepath.Join(dir, "vae"))
	res, err := DecodeCase(v, filepath.Join(dir, "cases", "vae_decode"))
	checkErrors(t, res, err)
	if len(res) != 2 {
		t.Errorf("compared %d tensors, the case has 2", len(res))
	}
}

// The package's own reference cases (scripts/wan_vae_reference.py): another config
// (3 levels, temporal downsample first, z 6, non-square, 13 frames, batch 2), tiled
// encode and decode, and the Wan 2.2 TI2V variant.
func TestReferenceCases(t *testing.T) {
	for _, c := range []string{"config_b", "tiled", "ti2v"} {
		t.Run(c, func(t *testing.T) {
			dir := filepath.Join("testdata", c)
			v := load(t, dir)
			res, err := EncodeCase(v, dir)
			checkErrors(t, res, err)
			res, err = DecodeCase(v, dir)
			checkErrors(t, res, err)
		})
	}
}

// Denormalize gives what WanPipeline hands to vae.decode.
func TestGoldenDenormalize(t *testing.T) {
	dir := shared.Require(t, "golden", "wan-dev")
	v := load(t, filepath.Join(dir, "vae"))
	case_, err := readTensors(filepath.Join(dir, "cases", "full_pipeline_moe", "outputs.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := v.Config().Denormalize(case_["latents_final"])
	if err != nil {
		t.Fatal(err)
	}
	if !tensor.BitEqual(got, case_["latents_denorm"]) {
		t.Errorf("denormalised latents differ: rel L2 %.3g", tensor.RelL2(got, case_["latents_denorm"]))
	}
}
