package serve_test

import (
	"fmt"

	"github.com/vdpp/vdpp/serve"
)

func ExampleParseParams() {
	p, err := serve.ParseParams([]byte(`{"num_frames":4,"steps":8,"height":64,"width":96,"seed":1}`), serve.DefaultLimits())
	fmt.Println(p.NumFrames, p.Steps, p.LatentShape(4), p.Guided(), err)
	_, err = serve.ParseParams([]byte(`{"steps":500}`), serve.DefaultLimits())
	fmt.Println(err)
	// Output:
	// 4 8 [4 4 8 12] true <nil>
	// serve: request exceeds a server limit: steps 500 exceeds --max-steps 50
}
