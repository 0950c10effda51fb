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

// Sixteen equal steps on two stages whose last stage also decodes, the decode costing 26
// steps a sample: on the last stage alone the cut moves the steps off it; spread over
// both stages (--decode-ranks 2) the cut stays even.
func ExampleStageExtras() {
	cost := make([]float64, 16)
	for i := range cost {
		cost[i] = 1
	}
	for _, ranks := range []int{1, 2} {
		extra := pipeline.StageExtras(2, 0, 0, 26, ranks)
		plan, err := pipeline.CutStages(cost, 2, nil, extra)
		if err != nil {
			panic(err)
		}
		fmt.Println(extra, plan)
	}
	// Output:
	// [0 26] [[0,15) [15,16)]
	// [13 13] [[0,8) [8,16)]
}
