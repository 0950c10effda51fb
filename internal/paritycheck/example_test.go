package paritycheck_test

import (
	"fmt"

	"github.com/vdpp/vdpp/internal/paritycheck"
)

func ExampleLimit() {
	frames := paritycheck.Limit{RelL2: 1e-4, MaxAbs: 1e-4}
	got, ref := []float32{1, 2.00001}, []float32{1, 2}
	fmt.Println(frames, frames.Met(5e-6, 1e-5, paritycheck.MaxULP(got, ref)))
	// Output: rel L2 <= 1e-04, max <= 1e-04 true
}
