package clip_test

import (
	"fmt"

	"github.com/vdpp/vdpp/model/clip"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/tensor"
)

// Example builds a tiny CLIP image encoder with constant weights (a real one comes from
// clip.Load) and embeds one image.
func Example() {
	cfg, err := clip.ParseConfig("config.json", []byte(`{
		"hidden_size": 16, "intermediate_size": 32, "projection_dim": 8, "num_hidden_layers": 2,
		"num_attention_heads": 2, "image_size": 28, "patch_size": 14, "hidden_act": "gelu"}`))
	if err != nil {
		panic(err)
	}
	shapes, err := clip.ExpectedTensors(cfg)
	if err != nil {
		panic(err)
	}
	weights := map[string]*tensor.Dense{}
	for name, shape := range shapes {
		t := tensor.New(shape...)
		for i := range t.Data {
			t.Data[i] = 0.01 * float32(i%5-2)
		}
		weights[name] = t
	}
	backend, err := nn.NewBackend("go")
	if err != nil {
		panic(err)
	}
	m, err := clip.New(cfg, weights, backend)
	if err != nil {
		panic(err)
	}
	defer m.Close()

	embeds, last, err := m.Forward(tensor.New(1, 3, 28, 28))
	if err != nil {
		panic(err)
	}
	fmt.Println("image_embeds", embeds.Shape, "last_hidden_state", last.Shape)
	// Output:
	// image_embeds [1 8] last_hidden_state [1 5 16]
}
