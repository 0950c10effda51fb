package vae

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/model/checkpoint"
)

func TestConfigErrors(t *testing.T) {
	type parser func(path string, data []byte) error
	vae := func(p string, d []byte) error { _, err := ParseConfig(p, d); return err }
	cases := []struct {
		name    string
		parse   parser
		json    string
		mention string
	}{
		{"vae wrong class", vae, `{"_class_name": "AutoencoderKL"}`, "_class_name"},
		{"vae lengths", vae, `{"block_out_channels": [32, 64]}`, "down_block_types"},
		{"vae groupnorm", vae, `{"block_out_channels": [40]}`, "block_out_channels[0] = 40"},
		{"vae block type", vae, `{"down_block_types": ["DownBlock2D"]}`, "DownBlock2D"},
		{"vae scaling", vae, `{"scaling_factor": -1}`, "scaling_factor"},
		{"vae bool", vae, `{"force_upcast": "yes"}`, "force_upcast"},
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
	v, err := ParseConfig("v", []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(v, Config{Path: "v", InChannels: 3, OutChannels: 3, DownBlockTypes: []string{DownEncoderBlock2D},
		BlockOutChannels: []int{64}, LayersPerBlock: 1, LatentChannels: 4, SampleSize: 32, ScalingFactor: 0.18215, ForceUpcast: true}) {
		t.Errorf("VAE defaults %+v", v)
	}
}

// EncodeActivationBytes counts the encoder's largest layer on one image: on SVD's VAE at
// 1024x576, a full-size resnet convolution's input, normalised copy and output (128
// channels each); on a narrow two-block VAE at 256x256, the mid block's attention over
// 128x128 positions; it grows with the image and is 0 for no blocks.
func TestEncodeActivationBytes(t *testing.T) {
	svdVAE := Config{InChannels: 3, BlockOutChannels: []int{128, 256, 512, 512}, LayersPerBlock: 2}
	full := int64(1024 * 576)
	if got, want := svdVAE.EncodeActivationBytes(576, 1024), 4*3*128*full; got != want {
		t.Errorf("SVD VAE at 1024x576: %d B, want %d", got, want)
	}
	if a, b := svdVAE.EncodeActivationBytes(288, 512), svdVAE.EncodeActivationBytes(576, 1024); a >= b || a <= 0 {
		t.Errorf("512x288 %d B, 1024x576 %d B", a, b)
	}
	// A wide mid block over many positions: the attention's scores and softmax.
	wide := Config{InChannels: 3, BlockOutChannels: []int{8, 8}, LayersPerBlock: 1}
	if got, pos := wide.EncodeActivationBytes(256, 256), int64(128*128); got != 4*(2*pos*pos+5*8*pos) {
		t.Errorf("two blocks at 256x256: %d B, want the attention's %d", got, 4*(2*pos*pos+5*8*pos))
	}
	if got := (Config{}).EncodeActivationBytes(64, 64); got != 0 {
		t.Errorf("no blocks: %d B", got)
	}
}
