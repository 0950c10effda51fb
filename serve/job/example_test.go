package job_test

import (
	"fmt"

	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/knob"
	"github.com/vdpp/vdpp/serve/job"
)

// A job's JSON is read by the model's knob table, over its defaults, and checked against
// the server's limits; every refusal names the knob.
func ExampleParseJob() {
	desc := family.Description{Defaults: family.Params{NumFrames: 14, Steps: 25, Height: 576, Width: 1024, FPS: 7},
		Knobs: knob.Common()}
	p, err := job.ParseJob([]byte(`{"num_frames":4,"steps":8,"height":64,"width":96,"seed":1}`), desc, nil, nil, job.DefaultLimits())
	fmt.Println(p.NumFrames, p.Steps, p.Height, p.Width, p.Seed, err)
	_, err = job.ParseJob([]byte(`{"steps":500}`), desc, nil, nil, job.DefaultLimits())
	fmt.Println(err)
	_, err = job.ParseJob([]byte(`{"steps":5.5}`), desc, nil, nil, job.DefaultLimits())
	fmt.Println(err)
	// Output:
	// 4 8 64 96 1 <nil>
	// serve: request exceeds a server limit: steps 500 exceeds the server's --max-steps 50
	// serve: bad parameters: steps "5.5" must be an integer in [1, 10000]
}
