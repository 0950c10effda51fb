package openai_test

import (
	"fmt"

	_ "github.com/vdpp/vdpp/model/families" // the synthetic model
	"github.com/vdpp/vdpp/serve"
	"github.com/vdpp/vdpp/serve/job"
	"github.com/vdpp/vdpp/serve/openai"
)

// An OpenAI create's fields become a job's parameters over the model's defaults: 2 s at
// the default 7 fps is 14 frames; a size the model cannot make names the field at fault.
func ExampleParams() {
	m, err := serve.OpenModel(serve.ModelSpec{Name: "synthetic"})
	if err != nil {
		panic(err)
	}
	defer m.Close()
	p, err := openai.Params(m, map[string]string{
		"size": "128x64", "seconds": "2", "num_inference_steps": "10", "guidance_scale": "2.5", "seed": "3"}, job.DefaultLimits())
	fmt.Println(p.Width, p.Height, p.NumFrames, p.FPS, p.Steps, p.MinGuidance, p.MaxGuidance, p.Seed, err)
	_, err = openai.Params(m, map[string]string{"size": "1792x1024"}, job.DefaultLimits())
	fmt.Println(err)
	// Output:
	// 128 64 14 7 10 1 2.5 3 <nil>
	// size: over the server's limit: width 1792 exceeds the server's --max-resolution 1024 (this model's default size is 64x64)
}
