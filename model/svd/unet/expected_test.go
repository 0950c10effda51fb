package unet

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/vdpp/vdpp/internal/shared"
	"github.com/vdpp/vdpp/model/checkpoint"
	"github.com/vdpp/vdpp/model/nn"
)

// svdXTConfig is unet/config.json of SVD-XT (stabilityai/stable-video-diffusion-img2vid-xt).
const svdXTConfig = `{
  "_class_name": "UNetSpatioTemporalConditionModel",
  "addition_time_embed_dim": 256,
  "block_out_channels": [320, 640, 1280, 1280],
  "cross_attention_dim": 1024,
  "down_block_types": ["CrossAttnDownBlockSpatioTemporal", "CrossAttnDownBlockSpatioTemporal",
    "CrossAttnDownBlockSpatioTemporal", "DownBlockSpatioTemporal"],
  "in_channels": 8,
  "layers_per_block": 2,
  "num_attention_heads": [5, 10, 20, 20],
  "num_frames": 25,
  "out_channels": 4,
  "projection_class_embeddings_input_dim": 768,
  "sample_size": 96,
  "transformer_layers_per_block": 1,
  "up_block_types": ["UpBlockSpatioTemporal", "CrossAttnUpBlockSpatioTemporal",
    "CrossAttnUpBlockSpatioTemporal", "CrossAttnUpBlockSpatioTemporal"]
}`

// TestExpectedTensorsDevFile: the dev checkpoint's fp32 and fp16 files hold exactly the
// tensors the network declares.
func TestExpectedTensorsDevFile(t *testing.T) {
	ck := devCheckpoint(t)
	cfg, err := ReadConfig(ck)
	if err != nil {
		t.Fatal(err)
	}
	exp, err := ExpectedTensors(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, variant := range []string{"", "fp16"} {
		path, err := ck.WeightsPath(Component, variant)
		if err != nil {
			t.Fatal(err)
		}
		got := fileShapes(t, path)
		if err := nn.CheckTensors(exp, got); err != nil {
			t.Errorf("%s: %v", path, err)
		}
		if len(exp) != len(got) {
			t.Errorf("%s: %d tensors in the file, %d expected", path, len(got), len(exp))
		}
	}
}

// TestExpectedTensorsSVDXT: at full size the declared names and shapes are exactly those
// of the real checkpoint (shared/svd/unet_keys.txt, 1428 tensors).
func TestExpectedTensorsSVDXT(t *testing.T) {
	keys := shared.Require(t, "svd", "unet_keys.txt")
	data, err := os.ReadFile(keys)
	if err != nil {
		t.Fatal(err)
	}
	_, want, err := checkpoint.ParseKeyList(keys, data)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, json string
	}{
		{"explicit", svdXTConfig},
		{"diffusers defaults", `{}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exp, err := ExpectedTensors(parseConfig(t, tc.json))
			if err != nil {
				t.Fatal(err)
			}
			if err := nn.CheckTensors(exp, want); err != nil {
				t.Fatal(err)
			}
			var params int64
			for _, s := range exp {
				n := int64(1)
				for _, d := range s {
					n *= int64(d)
				}
				params += n
			}
			if len(exp) != 1428 || params != 1_524_623_082 {
				t.Fatalf("%d tensors, %d params; want 1428, 1524623082", len(exp), params)
			}
		})
	}
}

// TestExpectedTensorsConfigError: configs the network cannot run are reported as ErrConfig.
func TestExpectedTensorsConfigError(t *testing.T) {
	cfg := parseConfig(t, smallConfig2)
	cfg.CrossAttentionDim = []int{32, 16} // both levels read encoder_hidden_states
	if _, err := ExpectedTensors(cfg); !errors.Is(err, ErrConfig) {
		t.Fatalf("err = %v, want ErrConfig", err)
	}
	cfg = parseConfig(t, smallConfig2)
	cfg.LayersPerBlock = []int{1} // inconsistent list length
	if _, err := ExpectedTensors(cfg); !errors.Is(err, ErrConfig) {
		t.Fatalf("err = %v, want ErrConfig", err)
	}
}

// TestLoadReportsFileTensorAndShapes: a config that disagrees with the weights file makes
// Load fail naming the file, the tensor and both shapes.
func TestLoadReportsFileTensorAndShapes(t *testing.T) {
	ck := devCheckpoint(t)
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "unet"), 0o755); err != nil {
		t.Fatal(err)
	}
	idx, err := os.ReadFile(filepath.Join(ck.Dir, checkpoint.IndexFile))
	if err != nil {
		t.Fatal(err)
	}
	src, err := ck.WeightsPath(Component, "")
	if err != nil {
		t.Fatal(err)
	}
	weights := filepath.Join(dir, "unet", filepath.Base(src))
	cfg, err := os.ReadFile(filepath.Join(ck.Dir, "unet", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg = []byte(replaceOnce(t, string(cfg), `"in_channels": 8`, `"in_channels": 4`))
	for path, data := range map[string][]byte{
		filepath.Join(dir, checkpoint.IndexFile):  idx,
		filepath.Join(dir, "unet", "config.json"): cfg,
	} {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(src, weights); err != nil {
		t.Fatal(err)
	}
	bad, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Load(bad, "", backend(t))
	if !errors.Is(err, checkpoint.ErrShapeMismatch) {
		t.Fatalf("err = %v, want ErrShapeMismatch", err)
	}
	for _, want := range []string{weights, `"conv_in.weight"`, "[32 8 3 3]", "[32 4 3 3]"} {
		if !contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if _, err := Load(ck, "bf16", backend(t)); !errors.Is(err, checkpoint.ErrWeights) {
		t.Errorf("missing variant: err = %v, want ErrWeights", err)
	}
}

// TestNewChecksWeights: New rejects missing, unexpected and mis-shaped tensors.
func TestNewChecksWeights(t *testing.T) {
	cfg := parseConfig(t, smallConfig2)
	base := randomWeights(t, cfg, 1)
	cases := []struct {
		name string
		edit func(m map[string][]int)
		want error
	}{
		{"missing", func(m map[string][]int) { delete(m, "mid_block.attentions.0.time_mixer.mix_factor") }, nn.ErrMissingTensor},
		{"unexpected", func(m map[string][]int) { m["extra.weight"] = []int{2} }, nn.ErrUnexpectedTensor},
		{"shape", func(m map[string][]int) { m["conv_out.bias"] = []int{5} }, nn.ErrShapeMismatch},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			shapes := map[string][]int{}
			for n, d := range base {
				shapes[n] = d.Shape
			}
			tc.edit(shapes)
			w := withShapes(base, shapes)
			if _, err := New(cfg, w, backend(t)); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}
