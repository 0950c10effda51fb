package vae

import (
	"fmt"
	"slices"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// cacheFrames is CACHE_T: the frames a causal convolution (time kernel 3) keeps as its
// left context.
const cacheFrames = 2

// stepCache threads the temporal caches through one chunk's graph. Each cached layer
// takes its slot in call order: it reads the previous chunk's tensor (zeros on the first
// chunk, which is what diffusers' zero padding amounts to) and leaves the tensor the next
// chunk reads. The outputs of one chunk are the inputs of the next, in the same order.
type stepCache struct {
	first bool    // the first chunk: no inputs
	in    []*Node // the previous chunk's slots (nil when first)
	out   []*Node
}

// prev returns the previous chunk's slot for the next layer, or zeros of shape dims on the
// first chunk.
func (c *stepCache) prev(g *Graph, dims ...int) *Node {
	if c.first {
		return Zeros(g, shapes.Make(dtypeF32, dims...))
	}
	i := len(c.out)
	if i >= len(c.in) {
		panic(fmt.Errorf("wan/vae: cache slot %d of %d", i, len(c.in)))
	}
	p := c.in[i]
	if !slices.Equal(p.Shape().Dimensions, dims) {
		panic(fmt.Errorf("%w: cache slot %d is %v, the layer needs %v (a chunk of another size or batch?)", ErrInput, i, p.Shape().Dimensions, dims))
	}
	return p
}

// keep records the slot the next chunk reads.
func (c *stepCache) keep(n *Node) { c.out = append(c.out, n) }

// keepFirst keeps, on the first chunk, the last cacheFrames frames of [zeros, x] (x's
// context being cacheFrames zero frames) for the next chunk, materialising as few zeros as
// that takes.
func (c *stepCache) keepFirst(x *Node) {
	d := x.Shape().Dimensions
	if t := d[2]; t >= cacheFrames {
		c.keep(SliceAxis(x, 2, AxisRange(t-cacheFrames, t)))
		return
	}
	z := Zeros(x.Graph(), shapes.Make(dtypeF32, d[0], d[1], cacheFrames-d[2], d[3], d[4]))
	c.keep(Concatenate([]*Node{z, x}, 2))
}

// withContext prepends the cached left context to x [B, C, T, H, W] and keeps the last
// cacheFrames frames of the result for the next chunk: over chunks this is one causal
// sequence with two zero frames before its start.
func (c *stepCache) withContext(x *Node) *Node {
	d := x.Shape().Dimensions
	p := c.prev(x.Graph(), d[0], d[1], cacheFrames, d[3], d[4])
	xin := Concatenate([]*Node{p, x}, 2)
	t := xin.Shape().Dim(2)
	c.keep(SliceAxis(xin, 2, AxisRange(t-cacheFrames, t)))
	return xin
}
