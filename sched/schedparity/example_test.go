package schedparity_test

import (
	"fmt"

	"github.com/vdpp/vdpp/sched/schedparity"
)

// ExampleCheckCase checks one committed reference case and prints its verdicts.
func ExampleCheckCase() {
	res, err := schedparity.CheckCase("testdata/scheduler_unipc_n3")
	if err != nil {
		panic(err)
	}
	for _, r := range res {
		fmt.Printf("%-12s pass=%v max ulp %d\n", r.Tensor, r.Pass, r.MaxULP)
	}
	// Output:
	// sample_step0 pass=true max ulp 0
	// sample_step1 pass=true max ulp 0
	// sample_step2 pass=true max ulp 0
	// sigmas       pass=true max ulp 0
	// timesteps    pass=true max ulp 0
}
