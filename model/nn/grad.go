package nn

import (
	"fmt"
	"reflect"
	"slices"
	"sync"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

var (
	gradOnce        sync.Once
	origDotGeneralV graph.VJP
)

// installGradients replaces GoMLX v0.26's gradient of DotGeneral, which materialises the
// broadcast product lhs ⊗ rhs (an [M, N, K] tensor for an [M, K]·[K, N] product) and
// reduces it, with the textbook form: two DotGenerals (dY·B and Aᵀ·dY) and a transpose. The
// values are the same sums; memory and time drop from O(M·N·K) elementwise work to two
// matrix products. It runs once, when this package makes its first backend.
func installGradients() {
	gradOnce.Do(func() {
		origDotGeneralV = graph.VJPRegistration[graph.NodeTypeDotGeneral]
		graph.VJPRegistration[graph.NodeTypeDotGeneral] = dotGeneralVJP
	})
}

// dotGeneralParams reads the contracting and batch axes of a DotGeneral node (GoMLX keeps
// them in an unexported struct; reading through reflection does not modify anything).
func dotGeneralParams(node *graph.Node) (lc, lb, rc, rb []int, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("nn: reading DotGeneral parameters: %v", r)
		}
	}()
	in := reflect.ValueOf(node).Elem().FieldByName("inputs").Elem().Elem()
	ints := func(name string) []int {
		f := in.FieldByName(name)
		out := make([]int, f.Len())
		for i := range out {
			out[i] = int(f.Index(i).Int())
		}
		return out
	}
	return ints("lhsContractingAxes"), ints("lhsBatchAxes"), ints("rhsContractingAxes"), ints("rhsBatchAxes"), nil
}

// crossAxes returns the axes of a rank-r operand that are neither contracted nor batch.
func crossAxes(r int, contracting, batch []int) []int {
	var out []int
	for a := range r {
		if !slices.Contains(contracting, a) && !slices.Contains(batch, a) {
			out = append(out, a)
		}
	}
	return out
}

// rankIn returns the position of x in sorted(s).
func rankIn(s []int, x int) int {
	n := 0
	for _, y := range s {
		if y < x {
			n++
		}
	}
	return n
}

func axisRange(from, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = from + i
	}
	return out
}

// dotGeneralVJP is the gradient of Y = DotGeneral(A, B) with Y's axes [batch..., A cross...,
// B cross...]: dA = DotGeneral(dY, B) over B's cross axes, dB = DotGeneral(dY, A) over A's
// cross axes, each transposed back to its operand's layout.
func dotGeneralVJP(node *graph.Node, vjps []*graph.Node, s shapes.Shape) []*graph.Node {
	lc, lb, rc, rb, err := dotGeneralParams(node)
	ins := node.Inputs()
	if err != nil || len(ins) != 2 {
		return origDotGeneralV(node, vjps, s)
	}
	lhs, rhs, v := ins[0], ins[1], vjps[0]
	lx := crossAxes(lhs.Rank(), lc, lb)
	rx := crossAxes(rhs.Rank(), rc, rb)
	if len(lx) == 0 || len(rx) == 0 {
		return origDotGeneralV(node, vjps, s)
	}
	nb := len(lb)
	vBatch := axisRange(0, nb)
	vL := axisRange(nb, len(lx))
	vR := axisRange(nb+len(lx), len(rx))

	// dA: [batch, A cross, B's free axes = rc in ascending order].
	da := graph.DotGeneral(v, vR, vBatch, rhs, rx, rb)
	perm := make([]int, lhs.Rank())
	for i, a := range lb {
		perm[a] = i
	}
	for j, a := range lx {
		perm[a] = nb + j
	}
	for k, a := range lc {
		perm[a] = nb + len(lx) + rankIn(rc, rc[k])
	}
	da = graph.TransposeAllAxes(da, perm...)

	// dB: [batch, B cross, A's free axes = lc in ascending order].
	db := graph.DotGeneral(v, vL, vBatch, lhs, lx, lb)
	perm = make([]int, rhs.Rank())
	for i, a := range rb {
		perm[a] = i
	}
	for j, a := range rx {
		perm[a] = nb + j
	}
	for k, a := range rc {
		perm[a] = nb + len(rx) + rankIn(lc, lc[k])
	}
	db = graph.TransposeAllAxes(db, perm...)
	return []*graph.Node{da, db}
}
