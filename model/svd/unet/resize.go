package unet

import (
	"math"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import

	"github.com/vdpp/vdpp/model/nn"
)

// nearestIndex returns, for each of the out positions, the source index torch's
// interpolate(size=..., mode="nearest") reads: i>>1 when out = 2·in, else
// min(floor(i·scale), in−1) with scale = in/out evaluated in float32.
func nearestIndex(in, out int) []int {
	idx := make([]int, out)
	scale := float32(in) / float32(out)
	for i := range idx {
		switch {
		case out == in:
			idx[i] = i
		case out == 2*in:
			idx[i] = i >> 1
		default:
			idx[i] = min(int(math.Floor(float64(float32(i)*scale))), in-1)
		}
	}
	return idx
}

// resizeNearest resizes x [N, C, H, W] to [N, C, oh, ow] like torch's nearest
// interpolation. Exact doubling uses nn.UpsampleNearest2x; other sizes select rows and
// columns with a 0/1 matrix product (exact: each output is one input times 1 plus zeros).
func resizeNearest(x *Node, oh, ow int) *Node {
	d := x.Shape().Dimensions
	h, w := d[2], d[3]
	if oh == 2*h && ow == 2*w {
		return nn.UpsampleNearest2x(x)
	}
	if ow != w {
		x = DotGeneral(x, []int{3}, nil, selection(x.Graph(), w, ow), []int{0}, nil) // [N, C, H, ow]
	}
	if oh != h {
		x = DotGeneral(x, []int{2}, nil, selection(x.Graph(), h, oh), []int{0}, nil) // [N, C, ow, oh]
		x = TransposeAllAxes(x, 0, 1, 3, 2)
	}
	return x
}

// selection returns the [in, out] matrix with a 1 at (nearestIndex(in, out)[o], o).
func selection(g *Graph, in, out int) *Node {
	m := make([][]float32, in)
	for r := range m {
		m[r] = make([]float32, out)
	}
	for o, r := range nearestIndex(in, out) {
		m[r][o] = 1
	}
	return Const(g, m)
}
