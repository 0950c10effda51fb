package unet

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/vdpp/vdpp/internal/shared"
	"github.com/vdpp/vdpp/model/checkpoint"
)

// TestGoldenConfig reads the dev checkpoint's unet/config.json.
func TestGoldenConfig(t *testing.T) {
	ck, err := checkpoint.Open(shared.Require(t, "golden", "dev"))
	if err != nil {
		t.Fatal(err)
	}
	u, err := ReadConfig(ck)
	if err != nil {
		t.Fatal(err)
	}
	wantU := Config{
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
}
