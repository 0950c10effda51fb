package checkpoint

import (
	"strings"
	"testing"
)

var configSeeds = []string{
	`{}`, `[]`, `null`, `{"a":`, tinyUNetConfig,
	`{"transformer_layers_per_block": [[1, 2, 3], 1, 1, 1], "sample_size": [3, 4]}`,
	`{"num_attention_heads": 0, "block_out_channels": [32, 64, 96, 128]}`,
	`{"down_block_types": [], "up_block_types": []}`,
	`{"model_type": "clip", "vision_config": {"hidden_size": 64}}`,
	`{"size": {"height": 3, "width": 4}, "crop_size": 5, "image_mean": [1], "image_std": [1]}`,
	`{"block_out_channels": [32, 64], "down_block_types": ["DownEncoderBlock2D", "DownEncoderBlock2D"]}`,
}

// checkErr requires every parser error to name the file and carry a package prefix.
func checkErr(t *testing.T, err error) {
	if err != nil && (!strings.Contains(err.Error(), "fz.json") || !strings.Contains(err.Error(), "checkpoint: ")) {
		t.Fatalf("error does not name the file: %v", err)
	}
}

func FuzzParseUNetConfig(f *testing.F) {
	for _, s := range configSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseUNetConfig("fz.json", data)
		checkErr(t, err)
		if err != nil {
			return
		}
		// Everything a network builder calls must work on an accepted config.
		n := c.NumBlocks()
		_ = c.TimeEmbedDim() + c.NumAddedTimeIDs()
		for i := 0; i < n; i++ {
			_ = c.HeadDim(i)
			_ = c.DownHasAttention(i) || c.UpHasAttention(i)
			if c.DownHasAttention(i) {
				for l := 0; l < c.LayersPerBlock[i]; l++ {
					_ = c.TransformerLayers(i, l)
				}
			}
			if c.UpHasAttention(n - 1 - i) {
				for l := 0; l <= c.LayersPerBlock[i]; l++ {
					_ = c.TransformerLayers(i, l)
				}
			}
		}
		_ = c.TransformerLayers(n-1, 0)
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted config fails Validate: %v", err)
		}
	})
}

func FuzzParseVAEConfig(f *testing.F) {
	for _, s := range configSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseVAEConfig("fz.json", data)
		checkErr(t, err)
		if err == nil && (c.NumBlocks() < 1 || c.Validate() != nil) {
			t.Fatalf("accepted invalid config %+v", c)
		}
	})
}

func FuzzParseCLIPVisionConfig(f *testing.F) {
	for _, s := range configSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseCLIPVisionConfig("fz.json", data)
		checkErr(t, err)
		if err == nil && (c.HeadDim()*c.NumAttentionHeads != c.HiddenSize || c.NumPositions() < 2) {
			t.Fatalf("accepted inconsistent config %+v", c)
		}
	})
}

func FuzzParseFeatureExtractorConfig(f *testing.F) {
	for _, s := range configSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseFeatureExtractorConfig("fz.json", data)
		checkErr(t, err)
		if err == nil && len(c.ImageMean) != len(c.ImageStd) {
			t.Fatalf("accepted config %+v", c)
		}
	})
}

func FuzzParseModelIndex(f *testing.F) {
	f.Add([]byte(tinyIndex))
	f.Add([]byte(`{"x": [null, "y"], "_class_name": null}`))
	f.Add([]byte(`[1]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		idx, err := ParseModelIndex("fz.json", data)
		checkErr(t, err)
		if err == nil && idx.Components == nil {
			t.Fatal("nil component map")
		}
	})
}

func FuzzParseKeyList(f *testing.F) {
	f.Add([]byte("a\t[1, 2]\nb\t[]\n"))
	f.Add([]byte("a\t[1,,2]"))
	f.Add([]byte("\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		order, shapes, err := ParseKeyList("fz.json", data)
		checkErr(t, err)
		if err == nil && len(order) != len(shapes) {
			t.Fatalf("%d names, %d shapes", len(order), len(shapes))
		}
	})
}
