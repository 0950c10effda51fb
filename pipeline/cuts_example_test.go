package pipeline_test

import (
	"fmt"

	"github.com/vdpp/vdpp/pipeline"
)

// Eight equal steps whose denoiser switches at step 3 (a two-expert model), on two and on
// four stages: a stage boundary always sits on the switch.
func ExampleCutStages() {
	cost := []float64{1, 1, 1, 1, 1, 1, 1, 1}
	for _, k := range []int{2, 4} {
		plan, err := pipeline.CutStages(cost, k, []int{3}, nil)
		if err != nil {
			panic(err)
		}
		fmt.Println(plan)
	}
	// Output:
	// [[0,3) [3,8)]
	// [[0,3) [3,5) [5,7) [7,8)]
}
