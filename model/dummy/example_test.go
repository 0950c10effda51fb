package dummy_test

import (
	"context"
	"fmt"

	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/model/dummy"
	"github.com/vdpp/vdpp/tensor"
)

// Example builds the dummy denoiser and runs one guided pair of rows.
func Example() {
	den, err := dummy.New(dummy.Config{HiddenChannels: 8, LatentChannels: 4, Seed: 1, Backend: "go"})
	if err != nil {
		panic(err)
	}
	defer den.Close()
	in := model.Input{
		Latents:  tensor.New(2, 3, 4, 8, 8), // [N, T, C, H, W]
		Timestep: 0.5,
		Cond:     []model.Conditioning{{"vec": tensor.New(4)}, {"vec": tensor.New(4)}},
		Uncond:   []bool{true, false},
	}
	out, err := den.Predict(context.Background(), in)
	if err != nil {
		panic(err)
	}
	fmt.Println(out.Shape, den.WeightBytes())
	// Output: [2 3 4 8 8] 7696
}
