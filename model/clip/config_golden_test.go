package clip

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/vdpp/vdpp/internal/shared"
	"github.com/vdpp/vdpp/model/checkpoint"
)

// TestGoldenConfig reads the dev checkpoint's image_encoder/config.json and feature_extractor/preprocessor_config.json.
func TestGoldenConfig(t *testing.T) {
	ck, err := checkpoint.Open(shared.Require(t, "golden", "dev"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := ReadConfig(ck)
	if err != nil {
		t.Fatal(err)
	}
	wantC := Config{Path: filepath.Join(ck.Dir, "image_encoder", "config.json"), HiddenSize: 32, IntermediateSize: 37,
		ProjectionDim: 32, NumHiddenLayers: 2, NumAttentionHeads: 4, NumChannels: 3, ImageSize: 32, PatchSize: 4,
		HiddenAct: "gelu", LayerNormEps: 1e-5}
	if !reflect.DeepEqual(c, wantC) || c.NumPositions() != 65 || c.HeadDim() != 8 {
		t.Errorf("clip config\n got %+v\nwant %+v", c, wantC)
	}
	fe, err := ReadFeatureExtractor(ck)
	if err != nil {
		t.Fatal(err)
	}
	if fe.CropSize != (ImageSize{Height: 32, Width: 32}) || fe.Size != (ImageSize{ShortestEdge: 32}) ||
		!reflect.DeepEqual(fe.ImageStd, []float64{0.26862954, 0.26130258, 0.27577711}) || fe.Resample != 3 {
		t.Errorf("feature extractor %+v", fe)
	}
}
