package unet

import (
	"fmt"
	"slices"

	"github.com/vdpp/vdpp/tensor"
)

// The exchanges of the context-parallel forward, pure copies around one Comm.AllToAll.

func (r *cpRunner) exchange(x *exchange) error {
	switch x.kind {
	case exHalo:
		return r.halo(x)
	case exToSpace:
		return r.toSpace()
	default:
		return r.toFrames()
	}
}

// spaceSplit cuts n positions over size members: contiguous ranges whose sizes differ by
// at most one, larger first (some are empty when n < size).
func spaceSplit(n, size int) [][2]int {
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

// halo sends the member's GroupNorm partial statistics to every member and its first
// (last) frame of x.src to the previous (next) member, then combines the statistics of all
// members into the mean and variance over all frames (Chan et al.'s parallel formula, in
// float64) and stores them with the received halo frames (zeros at the video's ends).
func (r *cpRunner) halo(x *exchange) error {
	src, st := r.regs[x.src], r.regs[regStats]
	size, me := r.comm.Size(), r.comm.Index()
	tl := r.hi - r.lo
	if len(src.Shape) != 4 || src.Shape[0] != r.rows*tl || len(st.Shape) != 3 || st.Shape[0] != r.rows || st.Shape[2] != 2 {
		return fmt.Errorf("halo of %s %v with statistics %v", x.src, src.Shape, st.Shape)
	}
	frame := src.Len() / (r.rows * tl) // C·h·w
	ns := st.Len()
	ng := st.Shape[1]
	parts := make([]*tensor.Dense, size)
	for j := range parts {
		d := slices.Clone(st.Data)
		switch j {
		case me - 1:
			d = appendFrames(d, src.Data, r.rows, tl, frame, 0)
		case me + 1:
			d = appendFrames(d, src.Data, r.rows, tl, frame, tl-1)
		}
		parts[j] = &tensor.Dense{Shape: []int{len(d)}, Data: d}
	}
	got, err := r.comm.AllToAll(r.ctx, parts)
	if err != nil {
		return err
	}
	if len(got) != size {
		return fmt.Errorf("all-to-all returned %d parts for %d members", len(got), size)
	}
	for k, g := range got {
		want := ns
		if k == me-1 || k == me+1 {
			want += r.rows * frame
		}
		if g == nil || g.Len() != want {
			return fmt.Errorf("%w: member %d sent %d values, want %d", ErrFrames, k, lenOf(g), want)
		}
	}

	// Combine: member k holds n_k = (hi_k-lo_k)·per values of each (row, group).
	per := float64(frame / ng)
	gn := tensor.New(r.rows, ng, 2)
	for i := 0; i < r.rows*ng; i++ {
		var sum, cnt float64
		for k, g := range got {
			n := float64(r.his[k]-r.los[k]) * per
			sum += n * float64(g.Data[2*i])
			cnt += n
		}
		mean := sum / cnt
		var m2 float64
		for k, g := range got {
			n := float64(r.his[k]-r.los[k]) * per
			dm := float64(g.Data[2*i]) - mean
			m2 += float64(g.Data[2*i+1]) + n*dm*dm
		}
		gn.Data[2*i], gn.Data[2*i+1] = float32(mean), float32(m2/cnt)
	}
	shape := append([]int{r.rows}, src.Shape[1:]...)
	prev, next := tensor.New(shape...), tensor.New(shape...)
	if me > 0 {
		copy(prev.Data, got[me-1].Data[ns:])
	}
	if me < size-1 {
		copy(next.Data, got[me+1].Data[ns:])
	}
	r.regs[x.gn], r.regs[x.prev], r.regs[x.next] = gn, prev, next
	return nil
}

func lenOf(t *tensor.Dense) int {
	if t == nil {
		return -1
	}
	return t.Len()
}

// appendFrames appends frame f of every row of data [rows, tl, frame] to d.
func appendFrames(d, data []float32, rows, tl, frame, f int) []float32 {
	for b := range rows {
		o := (b*tl + f) * frame
		d = append(d, data[o:o+frame]...)
	}
	return d
}

// toSpace moves the tokens [B·Tl, S, C] from the frame split to the spatial split: member
// j gets positions spaceSplit(S)[j] of every frame, [B, T, Sj, C].
func (r *cpRunner) toSpace() error {
	tok := r.regs[regTok]
	size, me := r.comm.Size(), r.comm.Index()
	tl := r.hi - r.lo
	if len(tok.Shape) != 3 || tok.Shape[0] != r.rows*tl {
		return fmt.Errorf("tokens %v, want [%d, S, C]", tok.Shape, r.rows*tl)
	}
	s, c := tok.Shape[1], tok.Shape[2]
	sp := spaceSplit(s, size)
	parts := make([]*tensor.Dense, size)
	for j, rg := range sp {
		sj := rg[1] - rg[0]
		p := tensor.New(r.rows, tl, sj, c)
		for bt := range r.rows * tl {
			copy(p.Data[bt*sj*c:(bt+1)*sj*c], tok.Data[(bt*s+rg[0])*c:(bt*s+rg[1])*c])
		}
		parts[j] = p
	}
	got, err := r.comm.AllToAll(r.ctx, parts)
	if err != nil {
		return err
	}
	sm := sp[me][1] - sp[me][0]
	out := tensor.New(r.rows, r.total, sm, c)
	for k, g := range got {
		tk := r.his[k] - r.los[k]
		if g == nil || !slices.Equal(g.Shape, []int{r.rows, tk, sm, c}) {
			return fmt.Errorf("%w: member %d sent tokens %v, want %v", ErrFrames, k, shapeOf(g), []int{r.rows, tk, sm, c})
		}
		blk := tk * sm * c
		for b := range r.rows {
			copy(out.Data[(b*r.total+r.los[k])*sm*c:], g.Data[b*blk:(b+1)*blk])
		}
	}
	r.regs[regTokSpace] = out
	return nil
}

// toFrames is the inverse of toSpace: member k gets its frames of the member's positions,
// and the member rebuilds [B·Tl, S, C] from every member's positions.
func (r *cpRunner) toFrames() error {
	tsp := r.regs[regTokSpace]
	size := r.comm.Size()
	tl := r.hi - r.lo
	if len(tsp.Shape) != 4 || tsp.Shape[0] != r.rows || tsp.Shape[1] != r.total {
		return fmt.Errorf("spatial tokens %v, want [%d, %d, Sm, C]", tsp.Shape, r.rows, r.total)
	}
	sm, c := tsp.Shape[2], tsp.Shape[3]
	parts := make([]*tensor.Dense, size)
	for k := range parts {
		tk := r.his[k] - r.los[k]
		p := tensor.New(r.rows, tk, sm, c)
		blk := tk * sm * c
		for b := range r.rows {
			o := (b*r.total + r.los[k]) * sm * c
			copy(p.Data[b*blk:(b+1)*blk], tsp.Data[o:o+blk])
		}
		parts[k] = p
	}
	got, err := r.comm.AllToAll(r.ctx, parts)
	if err != nil {
		return err
	}
	s := 0
	for _, g := range got {
		if g == nil || len(g.Shape) != 4 {
			return fmt.Errorf("%w: malformed spatial tokens %v", ErrFrames, shapeOf(g))
		}
		s += g.Shape[2]
	}
	out := tensor.New(r.rows*tl, s, c)
	off := 0
	for j, g := range got {
		sj := g.Shape[2]
		if !slices.Equal(g.Shape, []int{r.rows, tl, sj, c}) {
			return fmt.Errorf("%w: member %d sent tokens %v, want [%d, %d, S, %d]", ErrFrames, j, g.Shape, r.rows, tl, c)
		}
		for bt := range r.rows * tl {
			copy(out.Data[(bt*s+off)*c:(bt*s+off+sj)*c], g.Data[bt*sj*c:(bt+1)*sj*c])
		}
		off += sj
	}
	r.regs[regTok] = out
	return nil
}

func shapeOf(t *tensor.Dense) []int {
	if t == nil {
		return nil
	}
	return t.Shape
}
