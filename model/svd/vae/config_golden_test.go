package vae

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/vdpp/vdpp/internal/shared"
	"github.com/vdpp/vdpp/model/checkpoint"
)

// TestGoldenConfig reads the dev checkpoint's vae/config.json.
func TestGoldenConfig(t *testing.T) {
	ck, err := checkpoint.Open(shared.Require(t, "golden", "dev"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := ReadConfig(ck)
	if err != nil {
		t.Fatal(err)
	}
	wantV := Config{Path: filepath.Join(ck.Dir, "vae", "config.json"), InChannels: 3, OutChannels: 3,
		DownBlockTypes: []string{DownEncoderBlock2D, DownEncoderBlock2D}, BlockOutChannels: []int{32, 64},
		LayersPerBlock: 2, LatentChannels: 4, SampleSize: 32, ScalingFactor: 0.18215, ForceUpcast: true}
	if !reflect.DeepEqual(v, wantV) || v.DownsampleFactor() != 2 {
		t.Errorf("vae config\n got %+v\nwant %+v", v, wantV)
	}
}
