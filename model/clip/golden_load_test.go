package clip

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/vdpp/vdpp/internal/shared"
	"github.com/vdpp/vdpp/model/checkpoint"
)

// clipExpected builds the tensor names and shapes of a CLIPVisionModelWithProjection from
// its config, as the CLIP network code would.
func clipExpected(c Config) map[string][]int {
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
	dir := shared.Require(t, "golden", "dev")
	ck, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ReadConfig(ck)
	if err != nil {
		t.Fatal(err)
	}
	expected := clipExpected(cfg)
	got, err := ck.LoadComponent(Component, "", expected, checkpoint.LoadOptions{Ignore: []string{"vision_model.embeddings.position_ids"}})
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
	keys, err := os.ReadFile(filepath.Join(dir, "..", "..", "svd", "image_encoder_keys.txt"))
	if err != nil {
		t.Skip(err)
	}
	_, real, err := checkpoint.ParseKeyList("image_encoder_keys.txt", keys)
	if err != nil {
		t.Fatal(err)
	}
	xt := Config{HiddenSize: 1280, IntermediateSize: 5120, ProjectionDim: 1024, NumHiddenLayers: 32,
		NumAttentionHeads: 16, NumChannels: 3, ImageSize: 224, PatchSize: 14, HiddenAct: "gelu", LayerNormEps: 1e-5}
	if want := clipExpected(xt); !reflect.DeepEqual(real, want) {
		t.Errorf("key list (%d tensors) differs from the config-built names (%d)", len(real), len(want))
	}
}
