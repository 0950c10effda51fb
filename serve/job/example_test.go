package job_test

import (
	"fmt"

	"github.com/vdpp/vdpp/serve/job"
)

func ExampleParseParams() {
	defaults := job.Params{NumFrames: 14, Steps: 25, Height: 576, Width: 1024, MinGuidance: 1, MaxGuidance: 3, FPS: 7}
	p, err := job.ParseParams([]byte(`{"num_frames":4,"steps":8,"height":64,"width":96,"seed":1}`), defaults, job.DefaultLimits())
	fmt.Println(p.NumFrames, p.Steps, p.Height, p.Width, p.Guided(), err)
	_, err = job.ParseParams([]byte(`{"steps":500}`), defaults, job.DefaultLimits())
	fmt.Println(err)
	// Output:
	// 4 8 64 96 true <nil>
	// serve: request exceeds a server limit: steps 500 exceeds --max-steps 50
}
