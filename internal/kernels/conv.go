package kernels

import (
	"fmt"
	"sync"

	"github.com/vdpp/vdpp/internal/gemm"
	"github.com/vdpp/vdpp/internal/parallel"
)

// ConvShape describes a convolution of x [N, C, D0, D1, D2] by w [O, C, K0, K1, K2] into
// [N, O, Out0, Out1, Out2], torch's conv3d; a 2D (1D) convolution sets the leading spatial
// sizes and kernel sizes to 1. Stride applies to every spatial axis; Pads are the
// (before, after) zero padding of each axis.
type ConvShape struct {
	N, C, O int
	In, K   [3]int
	Stride  int
	Pads    [3][2]int
}

// Out returns the output's spatial sizes.
func (s ConvShape) Out() [3]int {
	var o [3]int
	for i := range o {
		o[i] = (s.In[i]+s.Pads[i][0]+s.Pads[i][1]-s.K[i])/s.Stride + 1
	}
	return o
}

// Validate reports what is wrong with s.
func (s ConvShape) Validate() error {
	if s.N <= 0 || s.C <= 0 || s.O <= 0 || s.Stride <= 0 {
		return fmt.Errorf("kernels: conv %+v", s)
	}
	for i := range 3 {
		if s.In[i] <= 0 || s.K[i] <= 0 || s.Pads[i][0] < 0 || s.Pads[i][1] < 0 ||
			s.In[i]+s.Pads[i][0]+s.Pads[i][1] < s.K[i] {
			return fmt.Errorf("kernels: conv %+v: axis %d", s, i)
		}
	}
	return nil
}

// Conv sets out [N, O, Out...] to the convolution of x by w plus bias [O] (nil: none). It
// is a matrix product of w as [O, C·K0·K1·K2] with the input patches, which are never
// stored as a whole: for each block of output positions (one panel of the matrix kernel)
// the patch values are gathered straight from x into the kernel's packed layout, used for
// every output channel, and dropped. Each output element is Σ over (c, k0, k1, k2) in
// that order, then plus the bias, so the result does not depend on how the positions
// are split over the cores.
func Conv(out, x, w, bias []float32, s ConvShape) {
	k := s.C * s.K[0] * s.K[1] * s.K[2]
	if len(w) < s.O*k {
		panic(fmt.Sprintf("kernels: conv %+v: weight too short", s))
	}
	conv(out, x, bias, s, s.O, func(o0, o1 int) *[]float32 { return packWeights(w[o0*k:], o1-o0, k) })
}

// convGroupBytes bounds the float32 weights ConvMatrix widens at a time.
const convGroupBytes = 512 << 10

// ConvMatrix is Conv with the weight [O, C·K0·K1·K2] read through w (a weight held in a
// compact form): a group of output channels at a time is widened into a cache-sized buffer
// and convolved, so the weight never exists in float32 as a whole. The results are the
// bits of Conv on the widened weight.
func ConvMatrix(out, x []float32, w RowDecoder, bias []float32, s ConvShape) {
	k := s.C * s.K[0] * s.K[1] * s.K[2]
	group := max(8, convGroupBytes/(4*k)/8*8)
	wide := getPanel(min(group, s.O) * k)
	defer panelPool.Put(wide)
	conv(out, x, bias, s, group, func(o0, o1 int) *[]float32 {
		n := o1 - o0
		parallel.For(n, max(1, 1<<14/k), func(lo, hi int) {
			w.DecodeRows(o0+lo, o0+hi, (*wide)[lo*k:hi*k])
		})
		return packWeights(*wide, n, k)
	})
}

// conv runs the convolution for the output channels in groups of group channels, pack
// returning the packed weights of channels o0..o1−1 (given back to panelPool after use).
func conv(out, x, bias []float32, s ConvShape, group int, pack func(o0, o1 int) *[]float32) {
	if err := s.Validate(); err != nil {
		panic(err)
	}
	o := s.Out()
	p := o[0] * o[1] * o[2]
	if len(x) < s.N*s.C*s.In[0]*s.In[1]*s.In[2] || len(out) < s.N*s.O*p || (bias != nil && len(bias) < s.O) {
		panic(fmt.Sprintf("kernels: conv %+v: slices too short", s))
	}
	var run func(wp []float32, o0, o1 int)
	if s.Stride == 1 {
		var done func()
		run, done = convShifted(out, x, bias, s)
		defer done()
	} else {
		run = func(wp []float32, o0, o1 int) { convGathered(out, x, wp, bias, s, o0, o1) }
	}
	for o0 := 0; o0 < s.O; o0 += group {
		o1 := min(s.O, o0+group)
		wp := pack(o0, o1)
		run(*wp, o0, o1)
		panelPool.Put(wp)
	}
}

// convGathered computes output channels o0..o1−1 (wp their packed weights) of a strided
// convolution, gathering each panel's patch values.
func convGathered(out, x, wp, bias []float32, s ConvShape, o0, o1 int) {
	o := s.Out()
	p := o[0] * o[1] * o[2]
	k := s.C * s.K[0] * s.K[1] * s.K[2]
	og := o1 - o0
	pw := gemm.PanelWidth()
	panels := (p + pw - 1) / pw
	// Grain: a unit is one panel; give each goroutine at least ~200k multiply-adds.
	work := og * k * pw
	parallel.For(s.N*panels, max(1, 200_000/work), func(lo, hi int) {
		buf := getPanel(k * pw)
		defer panelPool.Put(buf)
		var segs []segment
		for u := lo; u < hi; u++ {
			n, q := u/panels, u%panels
			p0 := q * pw
			cols := min(pw, p-p0)
			segs = s.pack(*buf, x[n*s.C*s.In[0]*s.In[1]*s.In[2]:], p0, cols, o, segs)
			dst := out[(n*s.O+o0)*p+p0:]
			gemm.MulPackedAPanel(og, k, wp, *buf, cols, dst, p)
			if bias != nil {
				for oc := range og {
					row := dst[oc*p : oc*p+cols]
					b := bias[o0+oc]
					for i := range row {
						row[i] += b
					}
				}
			}
		}
	})
}

var panelPool sync.Pool

// packWeights packs w [o, k] for the matrix kernel once per call (every panel uses it).
func packWeights(w []float32, o, k int) *[]float32 {
	wp := getPanel(gemm.PackedALen(o, k))
	gemm.PackA(*wp, o, k, w, k)
	return wp
}

func getPanel(n int) *[]float32 {
	if b, ok := panelPool.Get().(*[]float32); ok && cap(*b) >= n {
		*b = (*b)[:n]
		return b
	}
	b := make([]float32, n)
	return &b
}

// segment is one contiguous run of patch values: n values of one input row, starting at
// src within a channel's plane (stride apart), go to the panel at dst within a channel's
// block of rows.
type segment struct{ dst, src, n int }

// pack writes the patch values of output positions p0..p0+cols−1 (of one batch row, x
// pointing at it) into panel as [K][w]: panel[q·w + j] is the input value that kernel
// entry q = ((c·K0 + k0)·K1 + k1)·K2 + k2 meets at position p0+j, 0 in the padding and in
// columns cols..w−1. The runs are worked out once for channel 0 (segs is scratch) and
// replayed for every channel.
func (s ConvShape) pack(panel, x []float32, p0, cols int, o [3]int, segs []segment) []segment {
	taps := s.K[0] * s.K[1] * s.K[2]
	pw := len(panel) / (s.C * taps)
	in0, in1, in2 := s.In[0], s.In[1], s.In[2]
	st := s.Stride
	segs = segs[:0]
	for j := 0; j < cols; {
		pos := p0 + j
		ow := pos % o[2]
		oh := (pos / o[2]) % o[1]
		ot := pos / (o[2] * o[1])
		run := min(cols-j, o[2]-ow)
		t := 0
		for k0 := range s.K[0] {
			it := ot*st + k0 - s.Pads[0][0]
			for k1 := range s.K[1] {
				ih := oh*st + k1 - s.Pads[1][0]
				for k2 := range s.K[2] {
					tap := t
					t++
					if it < 0 || it >= in0 || ih < 0 || ih >= in1 {
						continue
					}
					iw := ow*st + k2 - s.Pads[2][0] // input column of the run's first position
					lo, hi := 0, run
					for lo < hi && iw+lo*st < 0 {
						lo++
					}
					for hi > lo && iw+(hi-1)*st >= in2 {
						hi--
					}
					if lo < hi {
						segs = append(segs, segment{dst: tap*pw + j + lo, src: (it*in1+ih)*in2 + iw + lo*st, n: hi - lo})
					}
				}
			}
		}
		j += run
	}
	clear(panel)
	plane := in0 * in1 * in2
	for c := range s.C {
		dst, src := panel[c*taps*pw:(c+1)*taps*pw], x[c*plane:(c+1)*plane]
		if st == 1 {
			for _, g := range segs {
				copy(dst[g.dst:g.dst+g.n], src[g.src:g.src+g.n])
			}
			continue
		}
		for _, g := range segs {
			d := dst[g.dst : g.dst+g.n]
			for r := range d {
				d[r] = src[g.src+r*st]
			}
		}
	}
	return segs
}

// convShifted prepares Conv for stride 1 without gathering patches and returns run, which
// computes output channels o0..o1−1 from their packed weights wp, and done, which frees
// the padded input: x is copied once, zero
// padded, into xp [N, C, P0, P1, P2] (P = In + pads), and the output is computed on the
// grid of xp's positions, where the input a kernel entry meets at position v is
// xp[c, v + offset(entry)] for every v: a panel of w consecutive positions reads w
// consecutive values of xp per kernel entry, which the matrix kernel takes through a
// table of row pointers. Positions outside the output (the columns and rows beyond it
// in each padded row and plane) are computed and dropped. Results are the bits of the
// gathering form: the same sums in the same order.
func convShifted(out, x, bias []float32, s ConvShape) (run func(wp []float32, o0, o1 int), done func()) {
	o := s.Out()
	p := o[0] * o[1] * o[2]
	taps := s.K[0] * s.K[1] * s.K[2]
	k := s.C * taps
	pw := gemm.PanelWidth()
	var dp [3]int
	for i := range dp {
		dp[i] = s.In[i] + s.Pads[i][0] + s.Pads[i][1]
	}
	plane, planeP := s.In[0]*s.In[1]*s.In[2], dp[0]*dp[1]*dp[2]
	// The last panel of the last channel reads up to w values past the end.
	xpBuf := getPanel(s.N*s.C*planeP + pw)
	xp := *xpBuf
	clear(xp[s.N*s.C*planeP:])
	parallel.For(s.N*s.C, max(1, elementGrain/planeP), func(lo, hi int) {
		for nc := lo; nc < hi; nc++ {
			padPlane(xp[nc*planeP:(nc+1)*planeP], x[nc*plane:(nc+1)*plane], s.In, dp, s.Pads)
		}
	})
	offsets := make([]int, taps)
	t := 0
	for k0 := range s.K[0] {
		for k1 := range s.K[1] {
			for k2 := range s.K[2] {
				offsets[t] = (k0*dp[1]+k1)*dp[2] + k2
				t++
			}
		}
	}
	// Virtual positions v = (i0·P1 + i1)·P2 + i2 up to the last output position.
	pv := ((o[0]-1)*dp[1]+(o[1]-1))*dp[2] + o[2]
	// Panels: when output rows are whole panels wide, the panels of each row (all of whose
	// positions are outputs) write straight into out; otherwise consecutive virtual
	// positions, whose outputs are then picked out (scatterPanel).
	aligned := o[2]%pw == 0
	panels := (pv + pw - 1) / pw
	if aligned {
		panels = o[0] * o[1] * (o[2] / pw)
	}
	// A unit is a group of panels (of any batch rows) that share each block of weights
	// while it is in cache.
	const group = 4
	units := (s.N*panels + group - 1) / group
	run = func(wp []float32, o0, o1 int) {
		og := o1 - o0
		work := group * og * k * pw
		parallel.For(units, max(1, 200_000/work), func(lo, hi int) {
			tables := make([][]*float32, group)
			for g := range tables {
				tables[g] = make([]*float32, k)
			}
			var offs [group]int
			tileBuf := getPanel(og * group * pw)
			defer panelPool.Put(tileBuf)
			tile := *tileBuf
			ld := group * pw
			for u := lo; u < hi; u++ {
				first, last := u*group, min(s.N*panels, (u+1)*group)
				for g := range last - first {
					n, q := (first+g)/panels, (first+g)%panels
					v0 := q * pw
					offs[g] = g * pw
					if aligned {
						row, j0 := q/(o[2]/pw), q%(o[2]/pw)*pw // row = i0·o1 + i1
						v0 = ((row/o[1])*dp[1]+row%o[1])*dp[2] + j0
						offs[g] = (n*s.O+o0)*p + row*o[2] + j0
					}
					base := n*s.C*planeP + v0
					rows := tables[g]
					for c := range s.C {
						for t, off := range offsets {
							rows[c*taps+t] = &xp[base+c*planeP+off]
						}
					}
				}
				if aligned {
					gemm.MulPackedARowPtrGroup(og, k, wp, tables[:last-first], out, offs[:last-first], p)
					if bias != nil {
						for g := range last - first {
							for oc, b := range bias[o0:o1] {
								addScalar(out[offs[g]+oc*p:offs[g]+oc*p+pw], b)
							}
						}
					}
					continue
				}
				gemm.MulPackedARowPtrGroup(og, k, wp, tables[:last-first], tile, offs[:last-first], ld)
				var gb []float32
				if bias != nil {
					gb = bias[o0:o1]
				}
				for g := range last - first {
					n, q := (first+g)/panels, (first+g)%panels
					scatterPanel(out[(n*s.O+o0)*p:], tile[g*pw:], ld, gb, og, q*pw, pw, pv, p, dp, o)
				}
			}
		})
	}
	return run, func() { panelPool.Put(xpBuf) }
}

// scatterPanel copies the output positions among one panel's columns (virtual positions
// v0 .. v0+w−1 on the padded grid dp, tile rows of stride ld) into dst [O, P], plus bias, in
// runs along the last axis.
func scatterPanel(dst, tile []float32, ld int, bias []float32, o, v0, w, pv, p int, dp, out [3]int) {
	for j := 0; j < w && v0+j < pv; {
		v := v0 + j
		i2 := v % dp[2]
		i1 := (v / dp[2]) % dp[1]
		i0 := v / (dp[2] * dp[1])
		if i2 >= out[2] || i1 >= out[1] {
			j += dp[2] - i2 // skip to the next padded row
			continue
		}
		run := min(out[2]-i2, w-j, pv-v)
		at := (i0*out[1]+i1)*out[2] + i2
		for oc := range o {
			d := dst[oc*p+at : oc*p+at+run]
			src := tile[oc*ld+j : oc*ld+j+run]
			if bias == nil {
				copy(d, src)
				continue
			}
			copy(d, src)
			addScalar(d, bias[oc])
		}
		j += run
	}
}

// padPlane copies one channel's values src [In0, In1, In2] into dst [P0, P1, P2] with
// zeros around them (pads before/after each axis). Rows are short in the small networks
// (8 values), so the loops are written out rather than calling copy and clear per row.
func padPlane(dst, src []float32, in, dp [3]int, pads [3][2]int) {
	if dp == in {
		copy(dst, src)
		return
	}
	row := dp[2]
	sheet := dp[1] * row
	clear(dst[:pads[0][0]*sheet])         // planes before
	clear(dst[(pads[0][0]+in[0])*sheet:]) // planes after
	w, before := in[2], pads[2][0]
	for a := range in[0] {
		s := dst[(a+pads[0][0])*sheet : (a+pads[0][0]+1)*sheet]
		clear(s[:pads[1][0]*row])         // rows before
		clear(s[(pads[1][0]+in[1])*row:]) // rows after
		body := s[pads[1][0]*row : (pads[1][0]+in[1])*row]
		from := src[a*in[1]*w : (a+1)*in[1]*w]
		for b := range in[1] {
			r := body[b*row : (b+1)*row]
			v := from[b*w : (b+1)*w]
			for i := range before {
				r[i] = 0
			}
			r = r[before:]
			for i, x := range v {
				r[i] = x
			}
			for i := w; i < len(r); i++ {
				r[i] = 0
			}
		}
	}
}
