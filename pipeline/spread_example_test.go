package pipeline_test

import (
	"fmt"

	"github.com/vdpp/vdpp/pipeline"
)

// A 3-stage pipeline whose last stage (rank 2) shares the decode with rank 1: 5 samples in
// micro-batches of 2, each decoded in 3 parts, hand out 15 parts alternately.
func ExampleSpread_PartsOf() {
	sp := pipeline.Spread{Last: 2, Ranks: []int{2, 1}}
	groups := pipeline.Groups(5, 2)
	items := pipeline.ReplicaItems(len(groups), 0, 1)
	for _, r := range []int{0, 1, 2} {
		fmt.Printf("rank %d decodes %d parts\n", r, sp.PartsOf(r, items, groups, 3))
	}
	// Output:
	// rank 0 decodes 0 parts
	// rank 1 decodes 7 parts
	// rank 2 decodes 8 parts
}
