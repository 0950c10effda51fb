package vae

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/vdpp/vdpp/internal/shared"
	"github.com/vdpp/vdpp/model/checkpoint"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/safetensors"
)

// svdVAEConfig is vae/config.json of stabilityai/stable-video-diffusion-img2vid-xt.
const svdVAEConfig = `{
  "_class_name": "AutoencoderKLTemporalDecoder",
  "_diffusers_version": "0.24.0",
  "block_out_channels": [128, 256, 512, 512],
  "down_block_types": ["DownEncoderBlock2D", "DownEncoderBlock2D", "DownEncoderBlock2D", "DownEncoderBlock2D"],
  "force_upcast": true,
  "in_channels": 3,
  "latent_channels": 4,
  "layers_per_block": 2,
  "out_channels": 3,
  "sample_size": 768,
  "scaling_factor": 0.18215
}`

func TestExpectedTensorsMatchFiles(t *testing.T) {
	tests := []struct {
		name    string
		config  func(t *testing.T) Config
		file    func(t *testing.T) map[string][]int
		count   int
		nparams int64
	}{
		{
			name: "dev checkpoint",
			config: func(t *testing.T) Config {
				cfg, err := ReadConfig(openGolden(t))
				if err != nil {
					t.Fatal(err)
				}
				return cfg
			},
			file: func(t *testing.T) map[string][]int {
				f, err := safetensors.Open(filepath.Join(goldenDir(t), "vae", "diffusion_pytorch_model.safetensors"))
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				out := map[string][]int{}
				for _, n := range f.Names() {
					info, _ := f.Info(n)
					out[n] = info.Shape
				}
				return out
			},
			count: -1,
		},
		{
			name: "SVD release (vae_keys.txt)",
			config: func(t *testing.T) Config {
				cfg, err := ParseConfig("svd/vae/config.json", []byte(svdVAEConfig))
				if err != nil {
					t.Fatal(err)
				}
				return cfg
			},
			file: func(t *testing.T) map[string][]int {
				p := filepath.Join(shared.Require(t, "svd"), "vae_keys.txt")
				data, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				_, keys, err := checkpoint.ParseKeyList(p, data)
				if err != nil {
					t.Fatal(err)
				}
				return keys
			},
			count:   374,
			nparams: 97_742_847,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ExpectedTensors(tt.config(t))
			if err != nil {
				t.Fatal(err)
			}
			if err := nn.CheckTensors(got, tt.file(t)); err != nil {
				t.Fatal(err)
			}
			if tt.count >= 0 && len(got) != tt.count {
				t.Errorf("%d tensors, want %d", len(got), tt.count)
			}
			if tt.nparams > 0 {
				var n int64
				for _, s := range got {
					p := int64(1)
					for _, d := range s {
						p *= int64(d)
					}
					n += p
				}
				if n != tt.nparams {
					t.Errorf("%d parameters, want %d", n, tt.nparams)
				}
			}
		})
	}
}

func TestExpectedPartsSplit(t *testing.T) {
	cfg, err := ParseConfig("svd", []byte(svdVAEConfig))
	if err != nil {
		t.Fatal(err)
	}
	all, _ := ExpectedTensors(cfg)
	enc, err := expectedParts(cfg, true, false)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := expectedParts(cfg, false, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(enc)+len(dec) != len(all) {
		t.Errorf("encoder %d + decoder %d tensors != %d", len(enc), len(dec), len(all))
	}
	for n := range enc {
		if isDecoderTensor(n) {
			t.Errorf("encoder part declares %q", n)
		}
	}
	for n := range dec {
		if !isDecoderTensor(n) {
			t.Errorf("decoder part declares %q", n)
		}
	}
}

func TestExpectedTensorsRejectsBadConfig(t *testing.T) {
	cfg, err := ParseConfig("svd", []byte(svdVAEConfig))
	if err != nil {
		t.Fatal(err)
	}
	cfg.BlockOutChannels = []int{128, 250, 512, 512}
	if _, err := ExpectedTensors(cfg); err == nil {
		t.Fatal("no error for 250 channels")
	}
}
