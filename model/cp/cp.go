// Package cp holds what the families' context-parallel forwards share (SVD's UNet in
// model/svd/unet, Wan's transformer in model/wan/transformer): a member's share of a
// video's frames (Frames), the even split of a count over the members (Split), and the
// all-to-all that moves a tensor from a split of one axis over the members to a split of
// another (Reshard, and its inverse Unshard), which both forwards run around the layers
// that need every frame (SVD's temporal attention on a split of the positions, Wan's
// attention on a split of the heads).
//
// Contract: the exchanges only copy: every value arrives with its bits, so a forward built
// from them and from row-independent kernels gives the one-process bits. Every member must
// make the same sequence of calls; a part of the wrong shape fails with ErrShapes, naming
// the member.
package cp

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/tensor"
)

// ErrShapes: a member's frames do not fit the group's, or a member sent a part of the wrong
// shape.
var ErrShapes = errors.New("cp: members' parts do not fit")

// Comm is the group a member exchanges with (model.FrameComm: a comm.Group is one).
type Comm = model.FrameComm

// Frames places a member's share of a video: it holds frames [Lo, Hi) of Total. The
// members of a group, in member order, hold consecutive ranges that cover [0, Total).
type Frames struct{ Lo, Hi, Total int }

// Check reports what is wrong with f for a member holding frames frames.
func (f Frames) Check(frames int) error {
	if f.Lo < 0 || f.Hi <= f.Lo || f.Hi > f.Total || frames != f.Hi-f.Lo {
		return fmt.Errorf("%w: frames [%d, %d) of %d with %d frames held", ErrShapes, f.Lo, f.Hi, f.Total, frames)
	}
	return nil
}

// Split cuts n items over size members: contiguous ranges whose sizes differ by at most
// one, larger first (some are empty when n < size).
func Split(n, size int) [][2]int {
	out := make([][2]int, size)
	base, extra := n/size, n%size
	start := 0
	for i := range out {
		k := base
		if i < extra {
			k++
		}
		out[i] = [2]int{start, start + k}
		start += k
	}
	return out
}

// Reshard moves x [R, A, B, I], this member's A rows of each of R blocks (its share of
// axis A), to a split of axis B: member j gets x's B range bs[j] (the ranges cover
// [0, B) in order), and this member gets, of its own B range, every member's A rows,
// joined in member order: [R, ΣA, len(bs[me]), I]. It also returns every member's A count
// (what Unshard needs).
func Reshard(ctx context.Context, comm Comm, x *tensor.Dense, bs [][2]int) (*tensor.Dense, []int, error) {
	if len(x.Shape) != 4 || len(bs) != comm.Size() {
		return nil, nil, fmt.Errorf("%w: reshard of %v over %d ranges for %d members", ErrShapes, x.Shape, len(bs), comm.Size())
	}
	r, a, b, in := x.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3]
	parts := make([]*tensor.Dense, len(bs))
	for j, rg := range bs {
		w := (rg[1] - rg[0]) * in
		p := tensor.New(r, a, rg[1]-rg[0], in)
		for ra := range r * a {
			copy(p.Data[ra*w:(ra+1)*w], x.Data[(ra*b+rg[0])*in:])
		}
		parts[j] = p
	}
	got, err := comm.AllToAll(ctx, parts)
	if err != nil {
		return nil, nil, err
	}
	me := comm.Index()
	bm := bs[me][1] - bs[me][0]
	counts := make([]int, len(got))
	total := 0
	for k, g := range got {
		if g == nil || len(g.Shape) != 4 || g.Shape[0] != r || g.Shape[2] != bm || g.Shape[3] != in {
			return nil, nil, fmt.Errorf("%w: member %d sent %v, want [%d, rows, %d, %d]", ErrShapes, k, shapeOf(g), r, bm, in)
		}
		counts[k] = g.Shape[1]
		total += g.Shape[1]
	}
	out := tensor.New(r, total, bm, in)
	at := 0
	for k, g := range got {
		blk := counts[k] * bm * in
		for ri := range r {
			copy(out.Data[(ri*total+at)*bm*in:], g.Data[ri*blk:(ri+1)*blk])
		}
		at += counts[k]
	}
	return out, counts, nil
}

// Unshard is Reshard's inverse: x [R, ΣA, len(bs[me]), I] holds this member's B range of
// every member's A rows (counts[k] of member k, in member order); member k gets its A rows
// back, and this member joins every member's B range of its own rows into
// [R, counts[me], B, I].
func Unshard(ctx context.Context, comm Comm, x *tensor.Dense, bs [][2]int, counts []int) (*tensor.Dense, error) {
	me := comm.Index()
	total := 0
	for _, c := range counts {
		total += c
	}
	if len(bs) != comm.Size() || len(counts) != comm.Size() || len(x.Shape) != 4 || x.Shape[1] != total || x.Shape[2] != bs[me][1]-bs[me][0] {
		return nil, fmt.Errorf("%w: unshard of %v with %d rows over %d members", ErrShapes, x.Shape, total, comm.Size())
	}
	r, bm, in := x.Shape[0], x.Shape[2], x.Shape[3]
	parts := make([]*tensor.Dense, len(counts))
	at := 0
	for k, c := range counts {
		p := tensor.New(r, c, bm, in)
		blk := c * bm * in
		for ri := range r {
			copy(p.Data[ri*blk:(ri+1)*blk], x.Data[(ri*total+at)*bm*in:])
		}
		parts[k] = p
		at += c
	}
	got, err := comm.AllToAll(ctx, parts)
	if err != nil {
		return nil, err
	}
	b := bs[len(bs)-1][1]
	a := counts[me]
	out := tensor.New(r, a, b, in)
	for j, g := range got {
		w := (bs[j][1] - bs[j][0]) * in
		if g == nil || !slices.Equal(g.Shape, []int{r, a, bs[j][1] - bs[j][0], in}) {
			return nil, fmt.Errorf("%w: member %d sent %v, want %v", ErrShapes, j, shapeOf(g), []int{r, a, bs[j][1] - bs[j][0], in})
		}
		for ra := range r * a {
			copy(out.Data[(ra*b+bs[j][0])*in:(ra*b+bs[j][0])*in+w], g.Data[ra*w:(ra+1)*w])
		}
	}
	return out, nil
}

func shapeOf(t *tensor.Dense) []int {
	if t == nil {
		return nil
	}
	return t.Shape
}
