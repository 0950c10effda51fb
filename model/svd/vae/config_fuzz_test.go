package vae

import (
	"strings"
	"testing"
)

var configSeeds = []string{
	`{}`, `[]`, `null`, `{"a":`, `{"_class_name": "UNetSpatioTemporalConditionModel", "block_out_channels": [32, 64], "in_channels": 4,
 "down_block_types": ["CrossAttnDownBlockSpatioTemporal", "DownBlockSpatioTemporal"],
 "up_block_types": ["UpBlockSpatioTemporal", "CrossAttnUpBlockSpatioTemporal"], "num_attention_heads": [2, 4]}`,
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

func FuzzParseConfig(f *testing.F) {
	for _, s := range configSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig("fz.json", data)
		checkErr(t, err)
		if err == nil && (c.NumBlocks() < 1 || c.Validate() != nil) {
			t.Fatalf("accepted invalid config %+v", c)
		}
	})
}
