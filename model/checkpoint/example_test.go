package checkpoint_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/vdpp/vdpp/model/checkpoint"
	"github.com/vdpp/vdpp/safetensors"
	"github.com/vdpp/vdpp/tensor"
)

// Example opens a (tiny) checkpoint folder, reads the UNet config and loads weights
// against the names and shapes a network would declare from that config.
func Example() {
	dir, _ := os.MkdirTemp("", "ckpt-example")
	defer os.RemoveAll(dir)
	os.MkdirAll(filepath.Join(dir, "unet"), 0o755)
	os.WriteFile(filepath.Join(dir, "model_index.json"), []byte(`{"unet": ["diffusers", "UNetSpatioTemporalConditionModel"]}`), 0o644)
	os.WriteFile(filepath.Join(dir, "unet", "config.json"), []byte(`{"in_channels": 8, "block_out_channels": [32, 64, 64, 64],
		"num_attention_heads": [1, 2, 2, 2]}`), 0o644)
	safetensors.WriteFile(filepath.Join(dir, "unet", "diffusion_pytorch_model.safetensors"), []safetensors.NamedTensor{
		{Name: "conv_in.weight", Tensor: tensor.New(32, 8, 3, 3)}, {Name: "conv_in.bias", Tensor: tensor.New(32)}}, nil)

	ck, err := checkpoint.Open(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg, err := ck.UNetConfig()
	if err != nil {
		fmt.Println(err)
		return
	}
	c0 := cfg.BlockOutChannels[0]
	expected := map[string][]int{"conv_in.weight": {c0, cfg.InChannels, 3, 3}, "conv_in.bias": {c0}}
	weights, err := ck.LoadComponent(checkpoint.UNet, "", expected, checkpoint.LoadOptions{})
	fmt.Println(cfg.NumFrames, cfg.LayersPerBlock, weights["conv_in.weight"], err)

	// A network declaring a different input width gets an error naming file and tensor.
	expected["conv_in.weight"] = []int{c0, 4, 3, 3}
	_, err = ck.LoadComponent(checkpoint.UNet, "", expected, checkpoint.LoadOptions{})
	fmt.Println(err != nil)
	// Output:
	// 25 [2 2 2 2] Dense[32 8 3 3] <nil>
	// true
}

// ExampleReadSampling reads a folder's sampling defaults and fills the settings a user left
// to the model (negative values) from them.
func ExampleReadSampling() {
	dir, _ := os.MkdirTemp("", "sampling-example")
	defer os.RemoveAll(dir)
	s, _ := checkpoint.ReadSampling(dir) // no vdpp_sampling.json: SVD's defaults
	fmt.Printf("%+v\n", s)

	os.WriteFile(filepath.Join(dir, checkpoint.SamplingFile), []byte(`{"min_guidance": 2, "max_guidance": 4, "decode_chunk_size": 7}`), 0o644)
	s, err := checkpoint.ReadSampling(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	minG, maxG, chunk := s.Resolve(-1, 6, -1) // --max-guidance 6, the rest left to the model
	fmt.Println(minG, maxG, chunk)
	// Output:
	// {MinGuidance:1 MaxGuidance:3 DecodeChunkSize:0}
	// 2 6 7
}
