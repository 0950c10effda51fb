// Package configfuzz holds what the fuzz tests of the networks' config parsers share: seed
// documents covering every SVD component's config.json (and broken JSON), and the check
// that a parser's error names the file it read.
//
// A parser under test reads the name FileName; CheckErr fails the test when an error does
// not name it or lacks the checkpoint package's prefix. The package is for tests only.
package configfuzz

import (
	"strings"
	"testing"
)

// FileName is the file name fuzz tests pass to a config parser; CheckErr looks for it.
const FileName = "fz.json"

// Seeds are config documents every config fuzzer starts from: broken JSON, each SVD
// component's shape, and values a parser must refuse.
var Seeds = []string{
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

// AddSeeds adds Seeds to f's corpus.
func AddSeeds(f *testing.F) {
	for _, s := range Seeds {
		f.Add([]byte(s))
	}
}

// CheckErr fails t when err is not nil and does not name FileName with the "checkpoint: "
// prefix: every parser error must say which file was wrong.
func CheckErr(t *testing.T, err error) {
	t.Helper()
	if err != nil && (!strings.Contains(err.Error(), FileName) || !strings.Contains(err.Error(), "checkpoint: ")) {
		t.Fatalf("error does not name the file: %v", err)
	}
}
