package vae_test

import (
	"fmt"

	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/model/wan/vae"
	"github.com/vdpp/vdpp/tensor"
)

// Example builds a tiny Wan VAE with constant weights (a real one comes from vae.Load),
// encodes a non-square 5-frame video and streams the decode frame by frame.
func Example() {
	cfg, err := vae.ParseConfig("config.json", []byte(`{"base_dim": 4, "z_dim": 2, "dim_mult": [1, 2],
		"num_res_blocks": 1, "temperal_downsample": [true], "latents_mean": [0, 0], "latents_std": [1, 1]}`))
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
	v, err := vae.New(cfg, weights, backend)
	if err != nil {
		panic(err)
	}
	defer v.Close()

	post, err := v.Encode(tensor.New(1, 3, 5, 8, 12))
	if err != nil {
		panic(err)
	}
	fmt.Println("latents", post.Mode().Shape)
	err = v.DecodeStream(post.Mode(), func(frames *tensor.Dense) error {
		fmt.Println("frames", frames.Shape)
		return nil
	})
	if err != nil {
		panic(err)
	}
	// Output:
	// latents [1 2 3 4 6]
	// frames [1 3 1 8 12]
	// frames [1 3 2 8 12]
	// frames [1 3 2 8 12]
}
