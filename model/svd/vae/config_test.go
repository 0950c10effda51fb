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
