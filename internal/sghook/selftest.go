package sghook

import (
	"fmt"

	"github.com/gomlx/gomlx/backends/simplego"
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

// selfTest builds and runs, on a new simplego backend that runs every part, an inference
// graph with a fused node between two ordinary ops and a batched product whose operands
// need transposing, and checks the results.
func selfTest() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("sghook: self-test: %v", r)
		}
	}()
	b, err := simplego.New("")
	if err != nil {
		return err
	}
	defer b.Finalize()
	stateFor(b.(*simplego.Backend)).parts.Store(int32(All))
	g := graph.NewGraph(b, "sghook-selftest")
	defer g.Finalize()
	var outs []*graph.Node
	Inference(g, func() {
		x := graph.Parameter(g, "x", shapes.Make(dtypes.Float32, 2, 3))
		y := graph.AddScalar(x, 1)
		f := graph.MulScalar(Emit(g, x.Shape(), axpy{}, x, y), 10) // 10·(3x + 1)
		// p[j, i, l] = Σ_k f[k, j]·x[k, l]·(i+1) over a batch axis j of f and x's transpose.
		xt := graph.TransposeAllAxes(graph.Concatenate([]*graph.Node{x, graph.MulScalar(x, 2)}, 0), 1, 0) // [3, 4]
		p := graph.DotGeneral(f, []int{0}, []int{1}, graph.Reshape(xt, 3, 2, 2), []int{1}, []int{0})
		outs = []*graph.Node{f, p}
	})
	g.Compile(outs...)
	res := g.Run([][]float32{{1, 2, 3}, {4, 5, 6}})
	got := res[0].Value().([][]float32)
	want := [][]float32{{40, 70, 100}, {130, 160, 190}}
	for i := range want {
		for j := range want[i] {
			if got[i][j] != want[i][j] {
				return fmt.Errorf("sghook: fused-op self-test gave %v, want %v", got, want)
			}
		}
	}
	// x = [[1 2 3] [4 5 6]]; xt = [[1 4 2 8] [2 5 4 10] [3 6 6 12]] as [3, 2, 2]:
	// p[j, i] = Σ_k f[k, j]·xt[j, k, i].
	xt := [3][2][2]float32{{{1, 4}, {2, 8}}, {{2, 5}, {4, 10}}, {{3, 6}, {6, 12}}}
	prod := res[1].Value().([][]float32)
	for j := range 3 {
		for i := range 2 {
			var w float32
			for k := range 2 {
				w += want[k][j] * xt[j][k][i]
			}
			if prod[j][i] != w {
				return fmt.Errorf("sghook: product self-test gave %v at [%d %d], want %v", prod[j][i], j, i, w)
			}
		}
	}
	if n := Ran(b)["self-test"]; n != 1 {
		return fmt.Errorf("sghook: self-test: the fused op ran %d times, want 1", n)
	}
	return nil
}
