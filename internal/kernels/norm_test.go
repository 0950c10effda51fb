package kernels

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
)

func closeTo(t *testing.T, name string, got []float32, want []float64, tol float64) {
	t.Helper()
	for i := range want {
		if d := math.Abs(float64(got[i]) - want[i]); !(d <= tol*(1+math.Abs(want[i]))) {
			t.Fatalf("%s: element %d = %g, want %g", name, i, got[i], want[i])
		}
	}
}

func silu64(v float64) float64 { return v / (1 + math.Exp(-v)) }

func TestGroupNorm(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, g := range []GroupNormShape{
		{N: 2, C: 8, S: 12, Groups: 4, Eps: 1e-5},
		{N: 1, C: 6, S: 1000, Groups: 3, Eps: 1e-6, SiLU: true},
		{N: 3, C: 4, S: 5, Groups: 1, Eps: 1e-2},
		{N: 2, C: 8, S: 3 * 16, Groups: 4, Eps: 1e-5, SiLU: true, Parts: 3},
	} {
		x := randSlice(r, g.N*g.C*g.S, 2)
		for i := range x {
			x[i] += 50 // a large mean: the two-pass variance keeps the precision
		}
		gamma, beta := randSlice(r, g.C, 1), randSlice(r, g.C, 1)
		want := make([]float64, len(x))
		cg := g.C / g.Groups
		for n := range g.N {
			for grp := range g.Groups {
				base, cnt := (n*g.C+grp*cg)*g.S, cg*g.S
				var m, v float64
				for _, x := range x[base : base+cnt] {
					m += float64(x)
				}
				m /= float64(cnt)
				for _, x := range x[base : base+cnt] {
					v += (float64(x) - m) * (float64(x) - m)
				}
				v /= float64(cnt)
				for i := range cnt {
					c := grp*cg + i/g.S
					y := (float64(x[base+i])-m)/math.Sqrt(v+g.Eps)*float64(gamma[c]) + float64(beta[c])
					if g.SiLU {
						y = silu64(y)
					}
					want[base+i] = y
				}
			}
		}
		out := make([]float32, len(x))
		GroupNorm(out, x, gamma, beta, g)
		closeTo(t, "group norm", out, want, 2e-5)
		GroupNorm(x, x, gamma, beta, g) // in place
		closeTo(t, "group norm in place", x, want, 2e-5)
	}
}

// TestGroupNormPartsFromPieces: the statistics of a GroupNorm over parts (the frames of a
// video), assembled from the parts' sums as context-parallel members holding different
// frames assemble them (frames-major, the frames split between two members), and applied
// by GroupAffine, give GroupNorm's bits.
func TestGroupNormPartsFromPieces(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const n, c, frames, hw, groups = 2, 8, 5, 24, 4
	g := GroupNormShape{N: n, C: c, S: frames * hw, Groups: groups, Eps: 1e-6, SiLU: true, Parts: frames}
	x := randSlice(r, n*c*frames*hw, 2) // [N, C, T, hw]
	gamma, beta := randSlice(r, c, 1), randSlice(r, c, 1)
	want := make([]float32, len(x))
	GroupNorm(want, x, gamma, beta, g)

	// Frames-major [N, T, C, hw], as a member holds its frames.
	xt := make([]float32, len(x))
	for b := range n {
		for ch := range c {
			for f := range frames {
				copy(xt[((b*frames+f)*c+ch)*hw:][:hw], x[((b*c+ch)*frames+f)*hw:][:hw])
			}
		}
	}
	plane := func(b, f, ch int) []float32 { return xt[((b*frames+f)*c+ch)*hw:][:hw] }
	split := []int{0, 2, frames} // member 0 holds frames [0, 2), member 1 [2, 5)
	// pass computes one value per (row, channel, frame) on each member's frames, then
	// gathers them in channel then frame order for each (row, group).
	pass := func(f func(dst, p []float32, b, grp int)) [][]float32 {
		got := make([][]float32, n*groups)
		vals := make([]float32, n*c*frames)
		for m := range 2 {
			for b := range n {
				for fr := split[m]; fr < split[m+1]; fr++ {
					for ch := range c {
						f(vals[(b*c+ch)*frames+fr:][:1], plane(b, fr, ch), b, ch/(c/groups))
					}
				}
			}
		}
		for b := range n {
			for grp := range groups {
				got[b*groups+grp] = vals[(b*c+grp*(c/groups))*frames:][:c/groups*frames]
			}
		}
		return got
	}
	count := c / groups * frames * hw
	sums := pass(func(dst, p []float32, _, _ int) { PartSums(dst, p, hw) })
	means := make([]float64, n*groups)
	for i, s := range sums {
		means[i] = PartsMean(s, count)
	}
	devs := pass(func(dst, p []float32, b, grp int) { PartSqDevs(dst, p, hw, means[b*groups+grp]) })
	stats := make([]float32, 2*n*groups)
	for i := range devs {
		stats[2*i], stats[2*i+1] = float32(means[i]), PartsInvStd(devs[i], count, g.Eps)
	}
	got := make([]float32, len(xt))
	GroupAffine(got, xt, stats, gamma, beta, GroupAffineShape{N: n, F: frames, C: c, S: hw, Groups: groups, SiLU: true})
	for b := range n {
		for ch := range c {
			for f := range frames {
				for i := range hw {
					w, v := want[((b*c+ch)*frames+f)*hw+i], got[((b*frames+f)*c+ch)*hw+i]
					if math.Float32bits(w) != math.Float32bits(v) {
						t.Fatalf("row %d channel %d frame %d [%d]: %v from the pieces, %v from GroupNorm", b, ch, f, i, v, w)
					}
				}
			}
		}
	}
}

func TestRowNorm(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const b, s, d = 2, 3, 40
	x := randSlice(r, b*s*d, 3)
	gamma, beta := randSlice(r, d, 1), randSlice(r, d, 1)
	for _, n := range []RowNormShape{
		{Rows: b * s, D: d, Eps: 1e-5},
		{Rows: b * s, D: d, Eps: 1e-6, RMS: true},
		{Rows: b * s, D: d, Eps: 1e-6, ModRows: 1, RowsPerBatch: s},
		{Rows: b * s, D: d, Eps: 1e-6, ModRows: s, RowsPerBatch: s},
	} {
		scale, shift := randSlice(r, b*s*d, 1), randSlice(r, b*s*d, 1)
		want := make([]float64, len(x))
		for row := range n.Rows {
			src := x[row*d : (row+1)*d]
			var m, v float64
			for _, x := range src {
				m += float64(x)
				v += float64(x) * float64(x)
			}
			m /= d
			if n.RMS {
				v, m = v/d, 0
			} else {
				v = v/d - m*m
			}
			for i, x := range src {
				y := (float64(x) - m) / math.Sqrt(v+n.Eps) * float64(gamma[i])
				if !n.RMS {
					y += float64(beta[i])
				}
				if n.ModRows > 0 {
					mr := row / s * n.ModRows
					if n.ModRows > 1 {
						mr += row % s
					}
					y = y*(1+float64(scale[mr*d+i])) + float64(shift[mr*d+i])
				}
				want[row*d+i] = y
			}
		}
		out := make([]float32, len(x))
		bt := beta
		if n.RMS {
			bt = nil
		}
		RowNorm(out, x, gamma, bt, scale, shift, n)
		closeTo(t, "row norm", out, want, 1e-5)
	}
}

func TestChannelRMSNorm(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	s := ChannelRMSNormShape{N: 2, C: 5, S: 1100, Eps: 1e-12, SiLU: true}
	x := randSlice(r, s.N*s.C*s.S, 1)
	for i := range s.S { // one all-zero position: the norm is clamped to eps
		for c := range s.C {
			if i == 7 {
				x[c*s.S+i] = 0
			}
		}
	}
	gamma := randSlice(r, s.C, 1)
	want := make([]float64, len(x))
	for n := range s.N {
		for p := range s.S {
			var ss float64
			for c := range s.C {
				v := float64(x[(n*s.C+c)*s.S+p])
				ss += v * v
			}
			norm := max(math.Sqrt(ss), s.Eps)
			for c := range s.C {
				i := (n*s.C+c)*s.S + p
				want[i] = silu64(float64(x[i]) / norm * math.Sqrt(float64(s.C)) * float64(gamma[c]))
			}
		}
	}
	out := make([]float32, len(x))
	ChannelRMSNorm(out, x, gamma, s)
	closeTo(t, "channel RMS norm", out, want, 1e-5)
}

// TestNormsSplitInvariant checks the same bits for one and many goroutines.
func TestNormsSplitInvariant(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	g := GroupNormShape{N: 4, C: 32, S: 700, Groups: 8, Eps: 1e-6, SiLU: true}
	x := randSlice(r, g.N*g.C*g.S, 1)
	gamma, beta := randSlice(r, g.C, 1), randSlice(r, g.C, 1)
	run := func() []float32 {
		out := make([]float32, len(x))
		GroupNorm(out, x, gamma, beta, g)
		ChannelRMSNorm(out[:len(out)/2], x[:len(x)/2], gamma, ChannelRMSNormShape{N: 2, C: 32, S: 700, Eps: 1e-12})
		return out
	}
	many := run()
	old := runtime.GOMAXPROCS(1)
	one := run()
	runtime.GOMAXPROCS(old)
	for i := range one {
		if math.Float32bits(one[i]) != math.Float32bits(many[i]) {
			t.Fatalf("element %d: %g with one goroutine, %g with %d", i, one[i], many[i], old)
		}
	}
}

// TestAffineMatchesScalar checks the vector form of the norms' last step against the
// scalar steps bit for bit.
func TestAffineMatchesScalar(t *testing.T) {
	src := randSlice(rand.New(rand.NewPCG(9, 10)), 1003, 3)
	for _, silu := range []bool{false, true} {
		got := make([]float32, len(src))
		affine(got, src, 0.3, 1.7, -0.2, silu)
		old := vecExp
		vecExp = false
		want := make([]float32, len(src))
		affine(want, src, 0.3, 1.7, -0.2, silu)
		vecExp = old
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("silu=%v element %d: %g, scalar %g", silu, i, got[i], want[i])
			}
		}
	}
}
