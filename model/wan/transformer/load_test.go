package transformer

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/internal/goldentest"
	"github.com/vdpp/vdpp/model/checkpoint"
	"github.com/vdpp/vdpp/safetensors"
)

// A sharded transformer (diffusion_pytorch_model.safetensors.index.json and two shards, as
// the real Wan checkpoints ship) loads and gives the same output as the single file.
func TestLoadSharded(t *testing.T) {
	src := filepath.Join(goldenDir(t), "transformer")
	all := goldentest.ReadTensors(t, filepath.Join(src, "diffusion_pytorch_model.safetensors"))
	dir := t.TempDir()
	cfg, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	sort.Strings(names)
	shards := [2][]safetensors.NamedTensor{}
	weightMap := map[string]string{}
	for i, n := range names {
		shards[i%2] = append(shards[i%2], safetensors.NamedTensor{Name: n, Tensor: all[n]})
		weightMap[n] = []string{"diffusion_pytorch_model-00001-of-00002.safetensors", "diffusion_pytorch_model-00002-of-00002.safetensors"}[i%2]
	}
	for i, s := range shards {
		name := []string{"diffusion_pytorch_model-00001-of-00002.safetensors", "diffusion_pytorch_model-00002-of-00002.safetensors"}[i]
		if err := safetensors.WriteFile(filepath.Join(dir, name), s, nil); err != nil {
			t.Fatal(err)
		}
	}
	idx, _ := json.Marshal(map[string]any{"metadata": map[string]any{}, "weight_map": weightMap})
	if err := os.WriteFile(filepath.Join(dir, "diffusion_pytorch_model.safetensors.index.json"), idx, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := Load(dir, "", goldentest.Backend(t))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	cd := filepath.Join(goldenDir(t), "cases", "transformer_forward")
	in := goldentest.ReadTensors(t, filepath.Join(cd, "inputs.safetensors"))
	out := goldentest.ReadTensors(t, filepath.Join(cd, "outputs.safetensors"))
	got, err := m.Forward(in["hidden_states"], in["timestep"], in["encoder_hidden_states"], nil)
	if err != nil {
		t.Fatal(err)
	}
	goldentest.CheckClose(t, "output", got, out["output"], 1e-5)
}

// Missing weights, a missing variant and the weights of another config are one error
// naming the file.
func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"num_attention_heads": 2, "attention_head_dim": 20, "num_layers": 2, "text_dim": 32, "freq_dim": 32, "ffn_dim": 64, "in_channels": 4, "out_channels": 4}`), 0o644); err != nil {
		t.Fatal(err)
	}
	b := goldentest.Backend(t)
	if _, err := Load(dir, "", b); !errors.Is(err, checkpoint.ErrWeights) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("no weights: %v", err)
	}
	src := filepath.Join(goldenDir(t), "transformer", "diffusion_pytorch_model.safetensors")
	if err := os.Symlink(src, filepath.Join(dir, "diffusion_pytorch_model.safetensors")); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir, "fp16", b); !errors.Is(err, checkpoint.ErrWeights) {
		t.Fatalf("missing fp16 variant: %v", err)
	}
	if _, err := Load(dir, "", b); err != nil {
		t.Fatalf("dev weights: %v", err)
	}
	// The same file under a config with 3 layers: blocks.2.* are missing.
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"num_attention_heads": 2, "attention_head_dim": 20, "num_layers": 3, "text_dim": 32, "freq_dim": 32, "ffn_dim": 64, "in_channels": 4, "out_channels": 4}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(dir, "", b)
	if !errors.Is(err, checkpoint.ErrMissingTensor) || !strings.Contains(err.Error(), "blocks.2.") || !strings.Contains(err.Error(), "diffusion_pytorch_model.safetensors") {
		t.Fatalf("3-layer config on 2-layer weights: %v", err)
	}
}
