package checkpoint

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestUNetConfigDefaults(t *testing.T) {
	c, err := ParseUNetConfig("unet/config.json", []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	want := UNetConfig{
		Path:                              "unet/config.json",
		InChannels:                        8,
		OutChannels:                       4,
		DownBlockTypes:                    []string{CrossAttnDownBlockSpatioTemporal, CrossAttnDownBlockSpatioTemporal, CrossAttnDownBlockSpatioTemporal, DownBlockSpatioTemporal},
		UpBlockTypes:                      []string{UpBlockSpatioTemporal, CrossAttnUpBlockSpatioTemporal, CrossAttnUpBlockSpatioTemporal, CrossAttnUpBlockSpatioTemporal},
		BlockOutChannels:                  []int{320, 640, 1280, 1280},
		AdditionTimeEmbedDim:              256,
		ProjectionClassEmbeddingsInputDim: 768,
		LayersPerBlock:                    []int{2, 2, 2, 2},
		CrossAttentionDim:                 []int{1024, 1024, 1024, 1024},
		NumAttentionHeads:                 []int{5, 10, 20, 20},
		TransformerLayersPerBlock:         [][]int{{1}, {1}, {1}, {1}},
		NumFrames:                         25,
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("defaults:\n got %+v\nwant %+v", c, want)
	}
	if c.TimeEmbedDim() != 1280 || c.NumAddedTimeIDs() != 3 || c.HeadDim(0) != 64 || c.HeadDim(3) != 64 {
		t.Errorf("derived: time %d, ids %d, head %d/%d", c.TimeEmbedDim(), c.NumAddedTimeIDs(), c.HeadDim(0), c.HeadDim(3))
	}
	if !c.DownHasAttention(0) || c.DownHasAttention(3) || c.UpHasAttention(0) || !c.UpHasAttention(3) {
		t.Error("block attention flags wrong")
	}
}

func TestUNetConfigForms(t *testing.T) {
	c, err := ParseUNetConfig("u.json", []byte(`{
		"down_block_types": ["CrossAttnDownBlockSpatioTemporal", "DownBlockSpatioTemporal", "CrossAttnDownBlockSpatioTemporal"],
		"up_block_types": ["CrossAttnUpBlockSpatioTemporal", "UpBlockSpatioTemporal", "CrossAttnUpBlockSpatioTemporal"],
		"block_out_channels": [64, 96, 128], "num_attention_heads": 2, "layers_per_block": [1, 2, 1],
		"cross_attention_dim": [16, 16, 24], "transformer_layers_per_block": [1, 3, [2, 1]],
		"sample_size": [12, 20], "num_frames": null}`))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.NumAttentionHeads, []int{2, 2, 2}) || !reflect.DeepEqual(c.LayersPerBlock, []int{1, 2, 1}) ||
		!reflect.DeepEqual(c.SampleSize, []int{12, 20}) || c.NumFrames != 25 {
		t.Errorf("parsed %+v", c)
	}
	if got := [][]int{{c.TransformerLayers(0, 0)}, {c.TransformerLayers(1, 1)}, {c.TransformerLayers(2, 0), c.TransformerLayers(2, 1)}}; !reflect.DeepEqual(got, [][]int{{1}, {3}, {2, 1}}) {
		t.Errorf("TransformerLayers = %v", got)
	}
	if c.HeadDim(1) != 48 {
		t.Errorf("HeadDim(1) = %d", c.HeadDim(1))
	}
}

func TestConfigErrors(t *testing.T) {
	type parser func(path string, data []byte) error
	unet := func(p string, d []byte) error { _, err := ParseUNetConfig(p, d); return err }
	vae := func(p string, d []byte) error { _, err := ParseVAEConfig(p, d); return err }
	clip := func(p string, d []byte) error { _, err := ParseCLIPVisionConfig(p, d); return err }
	fe := func(p string, d []byte) error { _, err := ParseFeatureExtractorConfig(p, d); return err }
	two := `"down_block_types": ["CrossAttnDownBlockSpatioTemporal", "DownBlockSpatioTemporal"], "up_block_types": ["UpBlockSpatioTemporal", "CrossAttnUpBlockSpatioTemporal"], "num_attention_heads": [2, 4]`
	cases := []struct {
		name    string
		parse   parser
		json    string
		mention string
	}{
		{"unet not json", unet, `{`, ""},
		{"unet not object", unet, `[1]`, ""},
		{"unet wrong class", unet, `{"_class_name": "UNet2DConditionModel"}`, "_class_name"},
		{"unet string int", unet, `{"in_channels": "8"}`, "in_channels"},
		{"unet float int", unet, `{"in_channels": 8.5}`, "in_channels"},
		{"unet channels count", unet, `{` + two + `, "block_out_channels": [32, 64, 128]}`, "block_out_channels"},
		{"unet up count", unet, `{"up_block_types": ["UpBlockSpatioTemporal"]}`, "up_block_types"},
		{"unet heads count", unet, `{"num_attention_heads": [1, 2]}`, "num_attention_heads"},
		{"unet default heads do not fit", unet, `{"down_block_types": ["DownBlockSpatioTemporal"], "up_block_types": ["UpBlockSpatioTemporal"], "block_out_channels": [32]}`, "num_attention_heads"},
		{"unet groupnorm", unet, `{` + two + `, "block_out_channels": [48, 64]}`, "block_out_channels[0] = 48"},
		{"unet heads divide", unet, `{` + two + `, "block_out_channels": [32, 64], "num_attention_heads": [3, 4]}`, "num_attention_heads[0] = 3"},
		{"unet mid heads divide", unet, `{` + two + `, "block_out_channels": [32, 96], "num_attention_heads": [2, 5]}`, "num_attention_heads[1] = 5"},
		{"unet block type", unet, `{"down_block_types": ["CrossAttnDownBlock2D", "DownBlockSpatioTemporal"], "up_block_types": ["UpBlockSpatioTemporal", "CrossAttnUpBlockSpatioTemporal"], "num_attention_heads": [2, 4], "block_out_channels": [32, 64]}`, "CrossAttnDownBlock2D"},
		{"unet projection", unet, `{"projection_class_embeddings_input_dim": 100}`, "projection_class_embeddings_input_dim"},
		{"unet frames", unet, `{"num_frames": 0}`, "num_frames"},
		{"unet transformer layers", unet, `{"transformer_layers_per_block": [1, 1]}`, "transformer_layers_per_block"},
		{"unet transformer per-layer short", unet, `{"transformer_layers_per_block": [[1, 1], 1, 1, 1]}`, "transformer_layers_per_block[0]"},
		{"unet sample size", unet, `{"sample_size": [1, 2, 3]}`, "sample_size"},
		{"vae wrong class", vae, `{"_class_name": "AutoencoderKL"}`, "_class_name"},
		{"vae lengths", vae, `{"block_out_channels": [32, 64]}`, "down_block_types"},
		{"vae groupnorm", vae, `{"block_out_channels": [40]}`, "block_out_channels[0] = 40"},
		{"vae block type", vae, `{"down_block_types": ["DownBlock2D"]}`, "DownBlock2D"},
		{"vae scaling", vae, `{"scaling_factor": -1}`, "scaling_factor"},
		{"vae bool", vae, `{"force_upcast": "yes"}`, "force_upcast"},
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
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("err = %v, want ErrConfig", err)
			}
			if !strings.Contains(err.Error(), "dir/comp/config.json") || !strings.Contains(err.Error(), c.mention) {
				t.Errorf("err %q should name the file and mention %q", err, c.mention)
			}
		})
	}
}

func TestVAEAndCLIPDefaults(t *testing.T) {
	v, err := ParseVAEConfig("v", []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(v, VAEConfig{Path: "v", InChannels: 3, OutChannels: 3, DownBlockTypes: []string{DownEncoderBlock2D},
		BlockOutChannels: []int{64}, LayersPerBlock: 1, LatentChannels: 4, SampleSize: 32, ScalingFactor: 0.18215, ForceUpcast: true}) {
		t.Errorf("VAE defaults %+v", v)
	}
	c, err := ParseCLIPVisionConfig("c", []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c, CLIPVisionConfig{Path: "c", HiddenSize: 768, IntermediateSize: 3072, ProjectionDim: 512, NumHiddenLayers: 12,
		NumAttentionHeads: 12, NumChannels: 3, ImageSize: 224, PatchSize: 32, HiddenAct: "quick_gelu", LayerNormEps: 1e-5}) {
		t.Errorf("CLIP defaults %+v", c)
	}
	nested, err := ParseCLIPVisionConfig("c", []byte(`{"model_type": "clip", "projection_dim": 7, "vision_config": {"hidden_size": 64, "num_attention_heads": 4, "patch_size": 14}}`))
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

func TestParseModelIndex(t *testing.T) {
	idx, err := ParseModelIndex("m.json", []byte(`{"_class_name": "P", "unet": ["diffusers", "U"], "safety_checker": [null, null], "requires_safety_checker": true}`))
	if err != nil {
		t.Fatal(err)
	}
	if idx.ClassName != "P" || !reflect.DeepEqual(idx.Components, map[string]ComponentRef{"unet": {"diffusers", "U"}}) {
		t.Errorf("index %+v", idx)
	}
	for _, bad := range []string{`[`, `[]`, `{"_class_name": 3}`} {
		if _, err := ParseModelIndex("m.json", []byte(bad)); !errors.Is(err, ErrIndex) || !strings.Contains(err.Error(), "m.json") {
			t.Errorf("%s: err = %v, want ErrIndex naming m.json", bad, err)
		}
	}
}

func TestParseKeyList(t *testing.T) {
	order, shapes, err := ParseKeyList("k.txt", []byte("a.weight\t[2, 3]\n\nb\t[]\nc\t[4]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(order, []string{"a.weight", "b", "c"}) || !reflect.DeepEqual(shapes, map[string][]int{"a.weight": {2, 3}, "b": {}, "c": {4}}) {
		t.Errorf("got %v %v", order, shapes)
	}
	for _, bad := range []string{"a [2]", "a\t2", "a\t[x]", "a\t[-1]", "a\t[1]\na\t[1]", "\t[1]"} {
		if _, _, err := ParseKeyList("k.txt", []byte(bad)); !errors.Is(err, ErrKeyList) || !strings.Contains(err.Error(), "k.txt:") {
			t.Errorf("%q: err = %v", bad, err)
		}
	}
}
