package svdgen_test

import (
	"fmt"

	"github.com/vdpp/vdpp/serve"
	"github.com/vdpp/vdpp/serve/svdgen"
)

// ExampleToSVD maps a job's parameters to the SVD pipeline's, field for field.
func ExampleToSVD() {
	p, err := serve.ParseParams([]byte(`{"num_frames":3,"steps":2,"height":32,"width":32,"seed":5}`), serve.DefaultLimits())
	if err != nil {
		fmt.Println(err)
		return
	}
	pr := svdgen.ToSVD(p)
	fmt.Println(pr.NumFrames, pr.Steps, pr.Height, pr.Width, pr.Seed, pr.Guided(), svdgen.FromSVD(pr) == p)
	// Output: 3 2 32 32 5 true true
}
