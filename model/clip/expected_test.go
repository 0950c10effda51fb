package clip

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/vdpp/vdpp/internal/shared"
	"github.com/vdpp/vdpp/model/checkpoint"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/safetensors"
)

// vitH14Config is image_encoder/config.json of stabilityai/stable-video-diffusion-img2vid-xt
// (OpenCLIP ViT-H/14), the fields that matter.
const vitH14Config = `{
  "architectures": ["CLIPVisionModelWithProjection"],
  "hidden_act": "gelu",
  "hidden_size": 1280,
  "image_size": 224,
  "intermediate_size": 5120,
  "layer_norm_eps": 1e-05,
  "model_type": "clip_vision_model",
  "num_attention_heads": 16,
  "num_channels": 3,
  "num_hidden_layers": 32,
  "patch_size": 14,
  "projection_dim": 1024
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
				f, err := safetensors.Open(filepath.Join(goldenDir(t), "image_encoder", "model.safetensors"))
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
			count: 3 + 2 + 2*16 + 2 + 1, // embeddings, pre LN, 2 layers, post LN, projection
		},
		{
			name: "SVD release ViT-H/14 (image_encoder_keys.txt)",
			config: func(t *testing.T) Config {
				cfg, err := ParseConfig("svd/image_encoder/config.json", []byte(vitH14Config))
				if err != nil {
					t.Fatal(err)
				}
				return cfg
			},
			file: func(t *testing.T) map[string][]int {
				p := filepath.Join(shared.Require(t, "svd"), "image_encoder_keys.txt")
				data, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				_, keys, err := checkpoint.ParseKeyList(p, data)
				if err != nil {
					t.Fatal(err)
				}
				delete(keys, PositionIDsBuffer) // a buffer, not a weight, if listed
				return keys
			},
			count:   520,
			nparams: 632_076_800,
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
			if len(got) != tt.count {
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
