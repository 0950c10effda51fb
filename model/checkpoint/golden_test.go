package checkpoint

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/safetensors"
)

// sharedDir finds the shared/ folder: $VDPP_SHARED_DIR, the repository's shared/, or
// /work/shared. Tests needing it are skipped when it is absent.
func sharedDir(t *testing.T) string {
	t.Helper()
	for _, d := range []string{os.Getenv("VDPP_SHARED_DIR"), "../../shared", "/work/shared"} {
		if d == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "golden", "dev", IndexFile)); err == nil {
			return d
		}
	}
	t.Skip("shared/golden/dev not found (set VDPP_SHARED_DIR)")
	return ""
}

func TestGoldenConfigs(t *testing.T) {
	ck, err := Open(filepath.Join(sharedDir(t), "golden", "dev"))
	if err != nil {
		t.Fatal(err)
	}
	if ck.Index.ClassName != "StableVideoDiffusionPipeline" || !reflect.DeepEqual(ck.Components(), []string{"feature_extractor", "image_encoder", "scheduler", "unet", "vae"}) {
		t.Errorf("index %+v", ck.Index)
	}
	if ck.Index.Components["unet"] != (ComponentRef{"diffusers", "UNetSpatioTemporalConditionModel"}) {
		t.Errorf("unet ref %+v", ck.Index.Components["unet"])
	}
	// Each component's config file is named after its class.
	for comp, file := range map[string]string{"unet": "config.json", "vae": "config.json", "image_encoder": "config.json",
		"scheduler": "scheduler_config.json", "feature_extractor": "preprocessor_config.json"} {
		p, err := ck.ConfigPath(comp)
		if err != nil || p != filepath.Join(ck.Dir, comp, file) {
			t.Errorf("%s config path %q, %v", comp, p, err)
		}
	}
	// Each component's weights are named after its library.
	for comp, file := range map[string]string{"unet": "diffusion_pytorch_model.safetensors", "image_encoder": "model.safetensors"} {
		p, err := ck.WeightsPath(comp, "")
		if err != nil || p != filepath.Join(ck.Dir, comp, file) {
			t.Errorf("%s weights path %q, %v", comp, p, err)
		}
	}
}

// TestGoldenLoadFP16: the fp16 UNet variant loads as float32 with the fp32 values rounded
// to half.
func TestGoldenLoadFP16(t *testing.T) {
	ck, err := Open(filepath.Join(sharedDir(t), "golden", "dev"))
	if err != nil {
		t.Fatal(err)
	}
	f32, path, err := ck.OpenWeights("unet", "")
	if err != nil {
		t.Fatal(err)
	}
	defer f32.Close()
	if !strings.HasSuffix(path, filepath.Join("unet", "diffusion_pytorch_model.safetensors")) {
		t.Errorf("fp32 path %s", path)
	}
	expected := map[string][]int{}
	for _, n := range f32.Names() {
		info, _ := f32.Info(n)
		expected[n] = info.Shape
	}
	half, err := ck.LoadComponent("unet", "fp16", expected, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	full, err := LoadTensors(f32, path, expected, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"conv_in.weight", "time_embedding.linear_1.weight", "conv_out.bias"} {
		a, b := full[name], half[name]
		if a == nil || b == nil {
			t.Fatalf("%s not loaded", name)
		}
		for i := range a.Data {
			if want := safetensors.HalfToFloat32(safetensors.Float32ToHalf(a.Data[i])); math.Float32bits(b.Data[i]) != math.Float32bits(want) {
				t.Fatalf("%s[%d]: fp16 %g, want %g", name, i, b.Data[i], want)
			}
		}
	}
}
