package checkpoint

import (
	"fmt"
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
	if ck.Index.ClassName != "StableVideoDiffusionPipeline" || !reflect.DeepEqual(ck.Components(), []string{FeatureExtractor, ImageEncoder, Scheduler, UNet, VAE}) {
		t.Errorf("index %+v", ck.Index)
	}
	if ck.Index.Components[UNet] != (ComponentRef{"diffusers", UNetClassName}) {
		t.Errorf("unet ref %+v", ck.Index.Components[UNet])
	}
	u, err := ck.UNetConfig()
	if err != nil {
		t.Fatal(err)
	}
	wantU := UNetConfig{
		Path: filepath.Join(ck.Dir, "unet", "config.json"), SampleSize: []int{16}, InChannels: 8, OutChannels: 4,
		DownBlockTypes:   []string{CrossAttnDownBlockSpatioTemporal, DownBlockSpatioTemporal},
		UpBlockTypes:     []string{UpBlockSpatioTemporal, CrossAttnUpBlockSpatioTemporal},
		BlockOutChannels: []int{32, 64}, AdditionTimeEmbedDim: 32, ProjectionClassEmbeddingsInputDim: 96,
		LayersPerBlock: []int{2, 2}, CrossAttentionDim: []int{32, 32}, NumAttentionHeads: []int{2, 4},
		TransformerLayersPerBlock: [][]int{{1}, {1}}, NumFrames: 3,
	}
	if !reflect.DeepEqual(u, wantU) {
		t.Errorf("unet config\n got %+v\nwant %+v", u, wantU)
	}
	v, err := ck.VAEConfig()
	if err != nil {
		t.Fatal(err)
	}
	wantV := VAEConfig{Path: filepath.Join(ck.Dir, "vae", "config.json"), InChannels: 3, OutChannels: 3,
		DownBlockTypes: []string{DownEncoderBlock2D, DownEncoderBlock2D}, BlockOutChannels: []int{32, 64},
		LayersPerBlock: 2, LatentChannels: 4, SampleSize: 32, ScalingFactor: 0.18215, ForceUpcast: true}
	if !reflect.DeepEqual(v, wantV) || v.DownsampleFactor() != 2 {
		t.Errorf("vae config\n got %+v\nwant %+v", v, wantV)
	}
	c, err := ck.CLIPConfig()
	if err != nil {
		t.Fatal(err)
	}
	wantC := CLIPVisionConfig{Path: filepath.Join(ck.Dir, "image_encoder", "config.json"), HiddenSize: 32, IntermediateSize: 37,
		ProjectionDim: 32, NumHiddenLayers: 2, NumAttentionHeads: 4, NumChannels: 3, ImageSize: 32, PatchSize: 4,
		HiddenAct: "gelu", LayerNormEps: 1e-5}
	if !reflect.DeepEqual(c, wantC) || c.NumPositions() != 65 || c.HeadDim() != 8 {
		t.Errorf("clip config\n got %+v\nwant %+v", c, wantC)
	}
	fe, err := ck.FeatureExtractor()
	if err != nil {
		t.Fatal(err)
	}
	if fe.CropSize != (ImageSize{Height: 32, Width: 32}) || fe.Size != (ImageSize{ShortestEdge: 32}) ||
		!reflect.DeepEqual(fe.ImageStd, []float64{0.26862954, 0.26130258, 0.27577711}) || fe.Resample != 3 {
		t.Errorf("feature extractor %+v", fe)
	}
	sp, err := ck.SchedulerConfigPath()
	if err != nil || !strings.HasSuffix(sp, filepath.Join("scheduler", "scheduler_config.json")) {
		t.Errorf("scheduler config path %q, %v", sp, err)
	}
}

// clipExpected builds the tensor names and shapes of a CLIPVisionModelWithProjection from
// its config, as the CLIP network code would.
func clipExpected(c CLIPVisionConfig) map[string][]int {
	h, m := c.HiddenSize, c.IntermediateSize
	e := map[string][]int{
		"vision_model.embeddings.class_embedding":           {h},
		"vision_model.embeddings.patch_embedding.weight":    {h, c.NumChannels, c.PatchSize, c.PatchSize},
		"vision_model.embeddings.position_embedding.weight": {c.NumPositions(), h},
		"vision_model.pre_layrnorm.weight":                  {h},
		"vision_model.pre_layrnorm.bias":                    {h},
		"vision_model.post_layernorm.weight":                {h},
		"vision_model.post_layernorm.bias":                  {h},
		"visual_projection.weight":                          {c.ProjectionDim, h},
	}
	for l := 0; l < c.NumHiddenLayers; l++ {
		p := fmt.Sprintf("vision_model.encoder.layers.%d.", l)
		for _, proj := range []string{"q_proj", "k_proj", "v_proj", "out_proj"} {
			e[p+"self_attn."+proj+".weight"] = []int{h, h}
			e[p+"self_attn."+proj+".bias"] = []int{h}
		}
		for _, ln := range []string{"layer_norm1", "layer_norm2"} {
			e[p+ln+".weight"] = []int{h}
			e[p+ln+".bias"] = []int{h}
		}
		e[p+"mlp.fc1.weight"] = []int{m, h}
		e[p+"mlp.fc1.bias"] = []int{m}
		e[p+"mlp.fc2.weight"] = []int{h, m}
		e[p+"mlp.fc2.bias"] = []int{h}
	}
	return e
}

func TestGoldenLoadImageEncoder(t *testing.T) {
	shared := sharedDir(t)
	ck, err := Open(filepath.Join(shared, "golden", "dev"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ck.CLIPConfig()
	if err != nil {
		t.Fatal(err)
	}
	expected := clipExpected(cfg)
	got, err := ck.LoadComponent(ImageEncoder, "", expected, LoadOptions{Ignore: []string{"vision_model.embeddings.position_ids"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(expected) || len(got) != 40 {
		t.Fatalf("loaded %d tensors, expected %d (40)", len(got), len(expected))
	}
	for name, shape := range expected {
		if !reflect.DeepEqual(got[name].Shape, shape) || got[name].Len() != len(got[name].Data) {
			t.Errorf("%s: %v, want %v", name, got[name], shape)
		}
	}
	// The same builder reproduces the real SVD image encoder's key list from its config.
	keys, err := os.ReadFile(filepath.Join(shared, "svd", "image_encoder_keys.txt"))
	if err != nil {
		t.Skip(err)
	}
	_, real, err := ParseKeyList("image_encoder_keys.txt", keys)
	if err != nil {
		t.Fatal(err)
	}
	xt := CLIPVisionConfig{HiddenSize: 1280, IntermediateSize: 5120, ProjectionDim: 1024, NumHiddenLayers: 32,
		NumAttentionHeads: 16, NumChannels: 3, ImageSize: 224, PatchSize: 14, HiddenAct: "gelu", LayerNormEps: 1e-5}
	if want := clipExpected(xt); !reflect.DeepEqual(real, want) {
		t.Errorf("key list (%d tensors) differs from the config-built names (%d)", len(real), len(want))
	}
}

// TestGoldenLoadFP16: the fp16 UNet variant loads as float32 with the fp32 values rounded
// to half.
func TestGoldenLoadFP16(t *testing.T) {
	ck, err := Open(filepath.Join(sharedDir(t), "golden", "dev"))
	if err != nil {
		t.Fatal(err)
	}
	f32, path, err := ck.OpenWeights(UNet, "")
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
	half, err := ck.LoadComponent(UNet, "fp16", expected, LoadOptions{})
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
