package clip

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/model/checkpoint"
)

func TestConfigErrors(t *testing.T) {
	type parser func(path string, data []byte) error
	clip := func(p string, d []byte) error { _, err := ParseConfig(p, d); return err }
	fe := func(p string, d []byte) error { _, err := ParseFeatureExtractorConfig(p, d); return err }
	cases := []struct {
		name    string
		parse   parser
		json    string
		mention string
	}{
		{"clip heads", clip, `{"hidden_size": 30, "num_attention_heads": 4}`, "hidden_size 30"},
		{"clip act", clip, `{"hidden_act": "wiggle"}`, "wiggle"},
		{"clip model type", clip, `{"model_type": "bert"}`, "model_type"},
		{"clip nested missing", clip, `{"model_type": "clip"}`, "vision_config"},
		{"clip zero", clip, `{"num_hidden_layers": 0}`, "positive"},
		{"clip patch", clip, `{"image_size": 8, "patch_size": 16}`, "patch_size"},
		{"fe mean std", fe, `{"image_mean": [0.5, 0.5], "image_std": [0.5]}`, "image_mean"},
		{"fe std zero", fe, `{"image_std": [1, 0, 1]}`, "image_std[1]"},
		{"fe crop", fe, `{"crop_size": {"height": 0, "width": 3}}`, "crop_size"},
		{"fe size dict", fe, `{"size": {"longest": 3}}`, "size"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.parse("dir/comp/config.json", []byte(c.json))
			if !errors.Is(err, checkpoint.ErrConfig) {
				t.Fatalf("err = %v, want checkpoint.ErrConfig", err)
			}
			if !strings.Contains(err.Error(), "dir/comp/config.json") || !strings.Contains(err.Error(), c.mention) {
				t.Errorf("err %q should name the file and mention %q", err, c.mention)
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	c, err := ParseConfig("c", []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c, Config{Path: "c", HiddenSize: 768, IntermediateSize: 3072, ProjectionDim: 512, NumHiddenLayers: 12,
		NumAttentionHeads: 12, NumChannels: 3, ImageSize: 224, PatchSize: 32, HiddenAct: "quick_gelu", LayerNormEps: 1e-5}) {
		t.Errorf("CLIP defaults %+v", c)
	}
	nested, err := ParseConfig("c", []byte(`{"model_type": "clip", "projection_dim": 7, "vision_config": {"hidden_size": 64, "num_attention_heads": 4, "patch_size": 14}}`))
	if err != nil {
		t.Fatal(err)
	}
	if nested.HiddenSize != 64 || nested.PatchSize != 14 || nested.ProjectionDim != 512 || nested.NumPositions() != 257 {
		t.Errorf("nested CLIP config %+v", nested)
	}
	fe, err := ParseFeatureExtractorConfig("f", []byte(`{"size": 256, "crop_size": 224}`))
	if err != nil {
		t.Fatal(err)
	}
	if fe.Size != (ImageSize{ShortestEdge: 256}) || fe.CropSize != (ImageSize{Height: 224, Width: 224}) || fe.Resample != 3 ||
		!reflect.DeepEqual(fe.ImageMean, openAICLIPMean) || fe.RescaleFactor != 1.0/255 {
		t.Errorf("feature extractor %+v", fe)
	}
}

// ForwardBytes counts a forward pass's largest layer per image: on ViT-H/14 at 224 (257
// tokens, 16 heads, 1280 wide, MLP 5120) the attention's (the residual stream, norm, q,
// k, v, output and 16 heads' scores and softmax) outweigh the MLP's; two images cost twice one; a config without sizes costs nothing.
func TestForwardBytes(t *testing.T) {
	vit := Config{HiddenSize: 1280, IntermediateSize: 5120, NumAttentionHeads: 16, NumChannels: 3, ImageSize: 224, PatchSize: 14}
	const tokens = 257
	want := int64(4 * (3*224*224 + 6*tokens*1280 + 2*16*tokens*tokens + 2*tokens*1280))
	if got := vit.ForwardBytes(1); got != want {
		t.Errorf("ViT-H/14: %d B, want %d", got, want)
	}
	if one, two := vit.ForwardBytes(1), vit.ForwardBytes(2); two != 2*one {
		t.Errorf("two images %d B, one %d B", two, one)
	}
	if got := (Config{}).ForwardBytes(1); got != 0 {
		t.Errorf("no sizes: %d B", got)
	}
}
