package plan_test

import (
	"fmt"

	"github.com/vdpp/vdpp/plan"
)

// Plan 60 samples of 28 steps on 7 devices with the synthetic model at 1 ms per step and
// 0.1 ms hand-offs: data parallelism matches the step pipeline's throughput and has the
// lower first-sample latency.
func ExamplePlan() {
	res, err := plan.Plan(plan.Request{
		Workload: plan.Workload{Steps: 28, Samples: 60, Frames: 4, Channels: 4, Height: 16, Width: 16},
		Devices:  7,
		Costs:    plan.SyntheticCosts(1, 4, plan.Link{LatencyMS: 0.1}),
		Goal:     plan.GoalThroughput,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range res.Configs {
		fmt.Printf("%v: first %.1f ms, %.0f samples/s\n", p.Mesh, p.FirstSampleMS, p.SteadyThroughputPerS)
	}
	fmt.Println(res.Verdict.Throughput, res.Verdict.Latency)
	fmt.Println(res.Notes[1])
	// Output:
	// pp=1 cfg=1 cp=1 dp=7: first 28.0 ms, 250 samples/s
	// pp=7 cfg=1 cp=1 dp=1: first 28.6 ms, 250 samples/s
	// equal dp_better
	// throughput: data parallelism equals the step pipeline: dp=7 250.0 samples/s vs pp=7 250.0 samples/s; with the full model on every device a step pipeline can at best match dp
}
