package nn_test

import (
	"fmt"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import

	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/tensor"
)

// Example loads named weights, runs a one-layer network through a Program and shows how
// the same code declares the tensors it expects.
func Example() {
	backend, err := nn.NewBackend("go")
	if err != nil {
		panic(err)
	}
	layer := func(s nn.Scope, x *Node) *Node {
		g := x.Graph()
		return nn.Linear(x, s.Param(g, "proj.weight", 2, 3), s.Param(g, "proj.bias", 2))
	}
	weights, err := nn.NewWeights(backend, map[string]*tensor.Dense{
		"proj.weight": {Shape: []int{2, 3}, Data: []float32{1, 0, 0, 0, 1, 1}},
		"proj.bias":   {Shape: []int{2}, Data: []float32{10, 20}},
	})
	if err != nil {
		panic(err)
	}
	prog, err := nn.NewProgram(backend, weights, "example", func(s nn.Scope, in []*Node) []*Node {
		return []*Node{layer(s, in[0])}
	})
	if err != nil {
		panic(err)
	}
	defer prog.Close()
	out, err := prog.Run(&tensor.Dense{Shape: []int{1, 3}, Data: []float32{1, 2, 3}})
	if err != nil {
		panic(err)
	}
	fmt.Println(out[0].Shape, out[0].Data)

	expected, err := nn.Declare(backend, func(s nn.Scope, g *Graph) error {
		layer(s, Parameter(g, "x", nn.F32(1, 3)))
		return nil
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(nn.CheckTensors(expected, weights.Shapes()))
	// Output:
	// [1 2] [11 25]
	// <nil>
}
