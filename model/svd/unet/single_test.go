package unet

import (
	"errors"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/gguf"
	"github.com/vdpp/vdpp/internal/goldentest"
	"github.com/vdpp/vdpp/model/checkpoint"
	"github.com/vdpp/vdpp/tensor/quant"
)

// TestSingleFile: the dev UNet's weights as one f32 GGUF in diffusers' names (with the
// "unet." prefix of a pipeline's state dict) compute the folder's output bit for bit; a
// file in another layout is one line naming the layout read, the tensors and the file.
func TestSingleFile(t *testing.T) {
	ck := devCheckpoint(t)
	weights := goldentest.ReadTensors(t, filepath.Join(ck.Dir, "unet", "diffusion_pytorch_model.safetensors"))
	names := make([]string, 0, len(weights))
	for n := range weights {
		names = append(names, n)
	}
	sort.Strings(names)
	dir := t.TempDir()
	write := func(path string, rename func(string) string) {
		w := gguf.NewWriter()
		for _, n := range names {
			if err := w.AddFloat32(rename(n), quant.F32, weights[n].Shape, weights[n].Data); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.WriteFile(path); err != nil {
			t.Fatal(err)
		}
	}
	good := filepath.Join(dir, "unet.gguf")
	write(good, func(n string) string { return "unet." + n })
	m, err := LoadWith(ck, LoadOptions{File: good}, backend(t))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	in := readCase(t, ck, "unet_forward", "inputs")
	got, err := m.Forward(in["sample"], in["timestep"], in["encoder_hidden_states"], in["added_time_ids"])
	if err != nil {
		t.Fatal(err)
	}
	want, err := devModel(t, "").Forward(in["sample"], in["timestep"], in["encoder_hidden_states"], in["added_time_ids"])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Data, want.Data) {
		t.Error("the GGUF's UNet computes other bits than the folder's")
	}

	sgm := filepath.Join(dir, "sgm.gguf")
	write(sgm, func(n string) string {
		return "model.diffusion_model." + strings.ReplaceAll(n, "down_blocks", "input_blocks")
	})
	cfg, _ := ReadConfig(ck)
	_, err = OpenWeights(ck, cfg, LoadOptions{File: sgm})
	if !errors.Is(err, checkpoint.ErrMissingTensor) || !strings.Contains(err.Error(), sgm+" (read as diffusers' layout (the only one read for SVD's UNet)): ") ||
		strings.Contains(err.Error(), "\n") {
		t.Errorf("another layout: %v", err)
	}
}
