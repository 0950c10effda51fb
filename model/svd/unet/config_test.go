package unet

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/model/checkpoint"
)

func TestUNetConfigDefaults(t *testing.T) {
	c, err := ParseConfig("unet/config.json", []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
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
	c, err := ParseConfig("u.json", []byte(`{
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
	unet := func(p string, d []byte) error { _, err := ParseConfig(p, d); return err }
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

// TestReadConfig: the UNet's config.json is found through model_index.json; a missing
// file, an unlisted component and an invalid config are errors naming the file.
func TestReadConfig(t *testing.T) {
	write := func(t *testing.T, dir, name, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := `{"block_out_channels": [32, 64], "in_channels": 4, "down_block_types": ["CrossAttnDownBlockSpatioTemporal", "DownBlockSpatioTemporal"],
 "up_block_types": ["UpBlockSpatioTemporal", "CrossAttnUpBlockSpatioTemporal"], "num_attention_heads": [2, 4]}`
	cases := []struct {
		name, index, config string
		want                error
		mention             string
	}{
		{"ok", `{"unet": ["diffusers", "UNetSpatioTemporalConditionModel"]}`, cfg, nil, ""},
		{"not listed", `{"vae": ["diffusers", "AutoencoderKLTemporalDecoder"]}`, cfg, checkpoint.ErrIndex, `"unet"`},
		{"missing", `{"unet": ["diffusers", "UNetSpatioTemporalConditionModel"]}`, "", checkpoint.ErrConfig, filepath.Join("unet", "config.json")},
		{"invalid", `{"unet": ["diffusers", "UNetSpatioTemporalConditionModel"]}`, strings.Replace(cfg, "[32, 64]", "[30, 64]", 1),
			checkpoint.ErrConfig, "block_out_channels[0] = 30"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, dir, checkpoint.IndexFile, c.index)
			if c.config != "" {
				write(t, dir, filepath.Join("unet", "config.json"), c.config)
			}
			ck, err := checkpoint.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ReadConfig(ck)
			if c.want == nil {
				if err != nil || got.InChannels != 4 || got.Path != filepath.Join(dir, "unet", "config.json") {
					t.Fatalf("config %+v, %v", got, err)
				}
				return
			}
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.mention) {
				t.Errorf("err %v, want %v mentioning %q", err, c.want, c.mention)
			}
		})
	}
}
