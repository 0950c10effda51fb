package unet

import (
	"fmt"
	"slices"

	"github.com/vdpp/vdpp/internal/kernels"
	"github.com/vdpp/vdpp/model/cp"
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

// halo computes the GroupNorm statistics of x.src [B·Tl, C, h, w] over all frames, as the
// one-process temporal norm (nn.GroupNormFramesSiLU) does, and fetches the neighbouring
// frames: every member all-gathers the sums of its (row, channel, frame) planes
// (kernels.PartSums), from which each computes the mean of every (row, group) over all
// frames, in channel then frame order (kernels.PartsMean); then an all-to-all carries the
// planes' squared deviations from it (kernels.PartSqDevs) to every member, and the
// member's first (last) frame to the previous (next) one. The statistics (mean and
// 1/√(var + eps)) go to x.gn and the halo frames (zeros at the video's ends) to x.prev and
// x.next.
func (r *cpRunner) halo(x *exchange) error {
	src := r.regs[x.src]
	size, me := r.comm.Size(), r.comm.Index()
	tl := r.hi - r.lo
	if len(src.Shape) != 4 || src.Shape[0] != r.rows*tl || src.Shape[1]%groups != 0 {
		return fmt.Errorf("halo of %s %v", x.src, src.Shape)
	}
	c, hw := src.Shape[1], src.Shape[2]*src.Shape[3]
	frame := c * hw
	// planes applies f to each of the member's (row, channel, frame) planes into
	// [rows, C, Tl].
	planes := func(f func(dst, plane []float32, row, ch int)) []float32 {
		out := make([]float32, r.rows*c*tl)
		for row := range r.rows {
			for t := range tl {
				for ch := range c {
					f(out[(row*c+ch)*tl+t:][:1], src.Data[((row*tl+t)*c+ch)*hw:][:hw], row, ch)
				}
			}
		}
		return out
	}
	// gather joins the members' [rows, C, Tk] values into [rows, C, T] (frames in order).
	gather := func(parts []*tensor.Dense, n func(k int) int) ([]float32, error) {
		out := make([]float32, r.rows*c*r.total)
		for k, p := range parts {
			tk := r.his[k] - r.los[k]
			if p == nil || p.Len() < n(k) || n(k) < r.rows*c*tk {
				return nil, fmt.Errorf("%w: member %d sent %d statistics, want %d", ErrFrames, k, lenOf(p), r.rows*c*tk)
			}
			for rc := range r.rows * c {
				copy(out[rc*r.total+r.los[k]:][:tk], p.Data[rc*tk:(rc+1)*tk])
			}
		}
		return out, nil
	}
	cg := c / groups
	count := cg * r.total * hw
	group := func(all []float32, row, grp int) []float32 {
		return all[(row*c+grp*cg)*r.total : (row*c+(grp+1)*cg)*r.total]
	}

	sums := planes(func(dst, plane []float32, _, _ int) { kernels.PartSums(dst, plane, hw) })
	gotSums, err := r.comm.AllGather(r.ctx, &tensor.Dense{Shape: []int{len(sums)}, Data: sums})
	if err != nil {
		return err
	}
	if len(gotSums) != size {
		return fmt.Errorf("all-gather returned %d parts for %d members", len(gotSums), size)
	}
	allSums, err := gather(gotSums, func(k int) int { return lenOf(gotSums[k]) })
	if err != nil {
		return err
	}
	mean := make([]float64, r.rows*groups)
	for row := range r.rows {
		for grp := range groups {
			mean[row*groups+grp] = kernels.PartsMean(group(allSums, row, grp), count)
		}
	}

	devs := planes(func(dst, plane []float32, row, ch int) {
		kernels.PartSqDevs(dst, plane, hw, mean[row*groups+ch/cg])
	})
	parts := make([]*tensor.Dense, size)
	for j := range parts {
		d := slices.Clone(devs)
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
	nk := func(k int) int {
		want := r.rows * c * (r.his[k] - r.los[k])
		if k == me-1 || k == me+1 {
			want += r.rows * frame
		}
		return want
	}
	for k, g := range got {
		if g == nil || g.Len() != nk(k) {
			return fmt.Errorf("%w: member %d sent %d values, want %d", ErrFrames, k, lenOf(g), nk(k))
		}
	}
	allDevs, err := gather(got, nk)
	if err != nil {
		return err
	}
	gn := tensor.New(r.rows, groups, 2)
	for row := range r.rows {
		for grp := range groups {
			i := row*groups + grp
			gn.Data[2*i], gn.Data[2*i+1] = float32(mean[i]), kernels.PartsInvStd(group(allDevs, row, grp), count, x.eps)
		}
	}
	shape := append([]int{r.rows}, src.Shape[1:]...)
	prev, next := tensor.New(shape...), tensor.New(shape...)
	if me > 0 {
		copy(prev.Data, got[me-1].Data[r.rows*c*(r.his[me-1]-r.los[me-1]):])
	}
	if me < size-1 {
		copy(next.Data, got[me+1].Data[r.rows*c*(r.his[me+1]-r.los[me+1]):])
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
// j gets positions cp.Split(S)[j] of every frame, [B, T, Sj, C] (cp.Reshard).
func (r *cpRunner) toSpace() error {
	tok := r.regs[regTok]
	tl := r.hi - r.lo
	if len(tok.Shape) != 3 || tok.Shape[0] != r.rows*tl {
		return fmt.Errorf("tokens %v, want [%d, S, C]", tok.Shape, r.rows*tl)
	}
	s, c := tok.Shape[1], tok.Shape[2]
	out, counts, err := cp.Reshard(r.ctx, r.comm, &tensor.Dense{Shape: []int{r.rows, tl, s, c}, Data: tok.Data}, cp.Split(s, r.comm.Size()))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrFrames, err)
	}
	for k, n := range counts {
		if n != r.his[k]-r.los[k] {
			return fmt.Errorf("%w: member %d sent tokens of %d frames, it holds %d", ErrFrames, k, n, r.his[k]-r.los[k])
		}
	}
	r.regs[regTokSpace], r.positions = out, s
	return nil
}

// toFrames is the inverse of toSpace: member k gets its frames of the member's positions,
// and the member rebuilds [B·Tl, S, C] from every member's positions (cp.Unshard).
func (r *cpRunner) toFrames() error {
	tsp := r.regs[regTokSpace]
	if len(tsp.Shape) != 4 || tsp.Shape[0] != r.rows || tsp.Shape[1] != r.total {
		return fmt.Errorf("spatial tokens %v, want [%d, %d, Sm, C]", tsp.Shape, r.rows, r.total)
	}
	counts := make([]int, len(r.los))
	for k := range counts {
		counts[k] = r.his[k] - r.los[k]
	}
	s := r.positions
	out, err := cp.Unshard(r.ctx, r.comm, tsp, cp.Split(s, r.comm.Size()), counts)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrFrames, err)
	}
	r.regs[regTok] = &tensor.Dense{Shape: []int{r.rows * counts[r.comm.Index()], s, tsp.Shape[3]}, Data: out.Data}
	return nil
}

func shapeOf(t *tensor.Dense) []int {
	if t == nil {
		return nil
	}
	return t.Shape
}
