package serve_test

import (
	"fmt"

	"github.com/vdpp/vdpp/serve"
)

// An OpenAI create's fields become a job's parameters over the model's defaults: 2 s at
// the default 7 fps is 14 frames; a size the model cannot make names the field at fault.
func ExampleOpenAIParams() {
	m, err := serve.OpenModel(serve.ModelSpec{Name: "synthetic"})
	if err != nil {
		panic(err)
	}
	defer m.Close()
	p, err := serve.OpenAIParams(m, map[string]string{
		"size": "128x64", "seconds": "2", "num_inference_steps": "10", "guidance_scale": "2.5", "seed": "3"}, serve.DefaultLimits())
	fmt.Println(p.Width, p.Height, p.NumFrames, p.FPS, p.Steps, p.MinGuidance, p.MaxGuidance, p.Seed, err)
	_, err = serve.OpenAIParams(m, map[string]string{"size": "1792x1024"}, serve.DefaultLimits())
	fmt.Println(err)
	// Output:
	// 128 64 14 7 10 1 2.5 3 <nil>
	// size: request exceeds a server limit: 1792x1024 exceeds --max-resolution 1024 (this model's native size is 64x64)
}
