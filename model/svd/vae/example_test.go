package vae_test

import (
	"fmt"

	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/model/svd/vae"
	"github.com/vdpp/vdpp/tensor"
)

// Example builds a tiny VAE with constant weights (a real one comes from vae.Load), encodes
// a non-square image and decodes four frames in chunks of three.
func Example() {
	cfg, err := vae.ParseConfig("config.json", []byte(`{
		"block_out_channels": [32, 32], "down_block_types": ["DownEncoderBlock2D", "DownEncoderBlock2D"],
		"layers_per_block": 1, "latent_channels": 4}`))
	if err != nil {
		panic(err)
	}
	shapes, err := vae.ExpectedTensors(cfg)
	if err != nil {
		panic(err)
	}
	weights := map[string]*tensor.Dense{}
	for name, shape := range shapes {
		t := tensor.New(shape...)
		for i := range t.Data {
			t.Data[i] = 0.01 * float32(i%7-3)
		}
		weights[name] = t
	}
	backend, err := nn.NewBackend("go")
	if err != nil {
		panic(err)
	}
	m, err := vae.New(cfg, weights, backend)
	if err != nil {
		panic(err)
	}
	defer m.Close()

	post, err := m.Encode(tensor.New(1, 3, 16, 24))
	if err != nil {
		panic(err)
	}
	frames, err := m.Decode(tensor.New(4, 4, 8, 12), 3)
	if err != nil {
		panic(err)
	}
	fmt.Println(len(shapes), "tensors")
	fmt.Println("latent", post.Mode().Shape, "frames", frames.Shape)
	// Output:
	// 157 tensors
	// latent [1 4 8 12] frames [4 3 16 24]
}

// ExampleConfig_DecodeBytes estimates the memory of decoding a 256x256 video of 14 frames
// with the built-in model's VAE in calls of 7 frames, on the go backend of two cores (both
// calls at once, vdpp's fused ops, the Go heap) and one call at a time on a device.
func ExampleConfig_DecodeBytes() {
	cfg := vae.Config{InChannels: 3, OutChannels: 3, BlockOutChannels: []int{32, 32, 32, 32}, LayersPerBlock: 1, LatentChannels: 4}
	s := vae.DecodeShape{Frames: 14, Height: 256, Width: 256, Chunk: 7, Parallel: 2, Fused: true, GoHeap: true}
	fmt.Printf("go, 2 cores: %d MiB\n", cfg.DecodeBytes(s)>>20)
	s = vae.DecodeShape{Frames: 14, Height: 256, Width: 256, Chunk: 7, Parallel: 1}
	fmt.Printf("device: %d MiB\n", cfg.DecodeBytes(s)>>20)
	// Output:
	// go, 2 cores: 2079 MiB
	// device: 535 MiB
}
