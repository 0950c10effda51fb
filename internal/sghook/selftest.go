package sghook

import (
	"fmt"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// axpy is the self-test kernel: out = 2·x + y.
type axpy struct{}

func (axpy) Name() string { return "self-test" }
func (axpy) Run(out []float32, ins [][]float32) {
	for i := range out {
		out[i] = 2*ins[0][i] + ins[1][i]
	}
}

// selfTest builds and runs a graph with a fused node between two ordinary ops on a new
// simplego backend and checks the result.
func selfTest() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("sghook: fused-op self-test: %v", r)
		}
	}()
	b, err := backends.NewWithConfig("go")
	if err != nil {
		return err
	}
	defer b.Finalize()
	g := graph.NewGraph(b, "sghook-selftest")
	x := graph.Parameter(g, "x", shapes.Make(dtypes.Float32, 3))
	y := graph.AddScalar(x, 1)
	f := Emit(g, x.Shape(), axpy{}, x, y)
	g.Compile(graph.MulScalar(f, 10))
	out := g.Run([]float32{1, 2, 3})
	got := out[0].Value().([]float32)
	for i, want := range []float32{40, 70, 100} { // 10·(2x + x + 1)
		if got[i] != want {
			return fmt.Errorf("sghook: fused-op self-test gave %v, want [40 70 100]", got)
		}
	}
	return nil
}
