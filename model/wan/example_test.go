package wan_test

import (
	"fmt"

	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/model/wan"
	"github.com/vdpp/vdpp/tensor"
)

// ExampleOpen opens a Wan 2.2 two-expert folder, picks the expert of a timestep and runs it.
func ExampleOpen() {
	f, err := wan.Open("/path/to/Wan2.2-T2V-A14B-Diffusers")
	if err != nil {
		fmt.Println(err)
		return
	}
	backend, err := nn.NewBackend("go")
	if err != nil {
		fmt.Println(err)
		return
	}
	expert := f.ExpertFor(999, 1000) // 1: the high-noise transformer
	m, err := f.LoadTransformer(expert, "", backend)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	cfg := m.Config()
	latents := tensor.New(1, cfg.InChannels, 21, 60, 104)
	t := &tensor.Dense{Shape: []int{1}, Data: []float32{999}}
	text := tensor.New(1, 512, cfg.TextDim)
	v, err := m.Forward(latents, t, text, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(v.Shape)
}
