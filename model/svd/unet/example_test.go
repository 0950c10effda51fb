package unet_test

import (
	"fmt"

	"github.com/vdpp/vdpp/model/checkpoint"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/model/svd/unet"
	"github.com/vdpp/vdpp/tensor"
)

// ExampleExpectedTensors lists the tensors of the full SVD-XT UNet (diffusers' defaults)
// without allocating any weights.
func ExampleExpectedTensors() {
	cfg, err := unet.ParseConfig("unet/config.json", []byte(`{"num_frames": 25}`))
	if err != nil {
		panic(err)
	}
	exp, err := unet.ExpectedTensors(cfg)
	if err != nil {
		panic(err)
	}
	fmt.Println(len(exp), "tensors")
	fmt.Println(exp["down_blocks.0.resnets.0.temporal_res_block.conv1.weight"])
	fmt.Println(exp["mid_block.attentions.0.transformer_blocks.0.attn2.to_k.weight"])
	// Output:
	// 1428 tensors
	// [320 320 3 1 1]
	// [1280 1024]
}

// ExampleLoad loads a checkpoint's UNet on the pure-Go backend and runs one step.
func ExampleLoad() {
	ck, err := checkpoint.Open("/path/to/stable-video-diffusion-img2vid-xt")
	if err != nil {
		fmt.Println(err)
		return
	}
	backend, err := nn.NewBackend("go")
	if err != nil {
		fmt.Println(err)
		return
	}
	m, err := unet.Load(ck, "fp16", backend)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	cfg := m.Config()
	b, t, h, w := 1, cfg.NumFrames, 72, 128
	sample := tensor.New(b, t, cfg.InChannels, h, w)
	timestep := &tensor.Dense{Shape: []int{1}, Data: []float32{1.6378}}
	ehs := tensor.New(b, 1, cfg.CrossAttentionDim[0])
	ids := &tensor.Dense{Shape: []int{b, 3}, Data: []float32{6, 127, 0.02}}
	v, err := m.Forward(sample, timestep, ehs, ids)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(v.Shape)
}
