package kernels

import (
	"fmt"
	"math"

	"github.com/vdpp/vdpp/internal/parallel"
)

// sum64 returns Σ s[i] in float64, in an order fixed by len(s) (lane sums of the vector
// code, or four interleaved partial sums).
func sum64(s []float32) float64 {
	if vecExp {
		return sum64Vec(s)
	}
	var a, b, c, d float64
	i := 0
	for ; i+4 <= len(s); i += 4 {
		a += float64(s[i])
		b += float64(s[i+1])
		c += float64(s[i+2])
		d += float64(s[i+3])
	}
	for ; i < len(s); i++ {
		a += float64(s[i])
	}
	return (a + b) + (c + d)
}

// sqDev64 returns Σ (s[i] − m)² in float64, in the order of sum64.
func sqDev64(s []float32, m float64) float64 {
	if vecExp {
		return sqDev64Vec(s, m)
	}
	var a, b, c, d float64
	i := 0
	for ; i+4 <= len(s); i += 4 {
		x0, x1, x2, x3 := float64(s[i])-m, float64(s[i+1])-m, float64(s[i+2])-m, float64(s[i+3])-m
		a += x0 * x0
		b += x1 * x1
		c += x2 * x2
		d += x3 * x3
	}
	for ; i < len(s); i++ {
		x := float64(s[i]) - m
		a += x * x
	}
	return (a + b) + (c + d)
}

// meanInvStd returns the mean of s and 1/√(var + eps) with the biased variance computed
// in two passes (as PyTorch's CPU norms do), in float64.
func meanInvStd(s []float32, eps float64) (mean float32, inv float32) {
	n := float64(len(s))
	m := sum64(s) / n
	v := sqDev64(s, m) / n
	return float32(m), float32(1 / math.Sqrt(v+eps))
}

// GroupNormShape describes torch.nn.GroupNorm on x [N, C, S] (S the product of the
// trailing axes): C/Groups consecutive channels per group.
type GroupNormShape struct {
	N, C, S, Groups int
	Eps             float64
	// SiLU applies x·sigmoid(x) to the result (GroupNorm followed by SiLU, as in every
	// resnet block of the UNet and the VAEs).
	SiLU bool
	// Parts, when above 1, computes a group's statistics part by part: each channel's S
	// values are Parts equal parts (the frames of a video [C, T, h, w]), each part's sum
	// (then sum of squared deviations) is taken on its own and rounded to float32
	// (PartSums, PartSqDevs), and the parts' values are added in channel then part order
	// (PartsMean, PartsInvStd). Members of a context-parallel group that hold different
	// frames compute the same statistics this way.
	Parts int
}

// Validate reports what is wrong with g.
func (g GroupNormShape) Validate() error {
	if g.N <= 0 || g.C <= 0 || g.S <= 0 || g.Groups <= 0 || g.C%g.Groups != 0 || g.Parts < 0 || (g.Parts > 1 && g.S%g.Parts != 0) {
		return fmt.Errorf("kernels: group norm %+v", g)
	}
	return nil
}

// PartSums sets dst[i] to the sum of part i of x (parts of n values), taken in float64 and
// rounded to float32: the first pass of statistics over parts (GroupNormShape.Parts).
func PartSums(dst, x []float32, n int) {
	for i := range dst {
		dst[i] = float32(sum64(x[i*n : (i+1)*n]))
	}
}

// PartSqDevs sets dst[i] to the sum of squared deviations from mean of part i of x (parts
// of n values), taken in float64 and rounded to float32: the second pass.
func PartSqDevs(dst, x []float32, n int, mean float64) {
	for i := range dst {
		dst[i] = float32(sqDev64(x[i*n:(i+1)*n], mean))
	}
}

// PartsMean returns the mean of count values from their parts' sums (PartSums), added in
// the order given, in float64.
func PartsMean(sums []float32, count int) float64 {
	var t float64
	for _, v := range sums {
		t += float64(v)
	}
	return t / float64(count)
}

// PartsInvStd returns 1/√(var + eps) for the biased variance of count values from their
// parts' squared deviations (PartSqDevs), added in the order given.
func PartsInvStd(sqDevs []float32, count int, eps float64) float32 {
	var t float64
	for _, v := range sqDevs {
		t += float64(v)
	}
	return float32(1 / math.Sqrt(t/float64(count)+eps))
}

// partsMeanInvStd is meanInvStd of block (parts consecutive parts of n values) through
// PartSums and PartSqDevs.
func partsMeanInvStd(block []float32, parts, n int, eps float64) (mean, inv float32) {
	buf := make([]float32, parts)
	PartSums(buf, block, n)
	m := PartsMean(buf, len(block))
	PartSqDevs(buf, block, n, m)
	return float32(m), PartsInvStd(buf, len(block), eps)
}

// GroupAffineShape describes the normalisation step of a GroupNorm whose statistics are
// given: x [N, F, C, S] (F frames of C channels each), stats [N, Groups, 2] (the mean and
// 1/√(var + eps) of each row and group, float32).
type GroupAffineShape struct {
	N, F, C, S, Groups int
	SiLU               bool
}

// GroupAffine sets out to (x − mean)·inv·gamma + beta per (row, group) from stats, then
// SiLU if g.SiLU: GroupNorm's second step with the arithmetic of GroupNorm, so that with
// the same statistics every value has GroupNorm's bits. gamma and beta are [C] or nil; out
// may be x.
func GroupAffine(out, x, stats, gamma, beta []float32, g GroupAffineShape) {
	if g.N <= 0 || g.F <= 0 || g.C <= 0 || g.S <= 0 || g.Groups <= 0 || g.C%g.Groups != 0 || len(stats) < 2*g.N*g.Groups {
		panic(fmt.Errorf("kernels: group affine %+v with %d statistics", g, len(stats)))
	}
	cg := g.C / g.Groups
	parallel.For(g.N*g.F*g.C, max(1, 32768/g.S), func(lo, hi int) {
		for u := lo; u < hi; u++ {
			n, c := u/(g.F*g.C), u%g.C
			st := stats[2*(n*g.Groups+c/cg):]
			a, b := st[1], float32(0)
			if gamma != nil {
				a = st[1] * gamma[c]
			}
			if beta != nil {
				b = beta[c]
			}
			affine(out[u*g.S:(u+1)*g.S], x[u*g.S:(u+1)*g.S], st[0], a, b, g.SiLU)
		}
	})
}

// GroupNorm sets out = (x − mean)/√(var + eps)·gamma + beta per (row, group) (gamma, beta
// [C] or nil), then SiLU if g.SiLU. out may be x.
func GroupNorm(out, x, gamma, beta []float32, g GroupNormShape) {
	if err := g.Validate(); err != nil {
		panic(err)
	}
	cg := g.C / g.Groups
	block := cg * g.S
	parallel.For(g.N*g.Groups, max(1, 32768/block), func(lo, hi int) {
		for u := lo; u < hi; u++ {
			n, grp := u/g.Groups, u%g.Groups
			base := (n*g.C + grp*cg) * g.S
			var mean, inv float32
			if g.Parts > 1 {
				mean, inv = partsMeanInvStd(x[base:base+block], cg*g.Parts, g.S/g.Parts, g.Eps)
			} else {
				mean, inv = meanInvStd(x[base:base+block], g.Eps)
			}
			for c := grp * cg; c < (grp+1)*cg; c++ {
				a, b := inv, float32(0)
				if gamma != nil {
					a = inv * gamma[c]
				}
				if beta != nil {
					b = beta[c]
				}
				off := (n*g.C + c) * g.S
				affine(out[off:off+g.S], x[off:off+g.S], mean, a, b, g.SiLU)
			}
		}
	})
}

// RowNormShape describes a normalisation over the last axis of x [Rows, D].
type RowNormShape struct {
	Rows, D int
	Eps     float64
	// RMS normalises by √(mean(x²) + eps) without subtracting the mean (RMSNorm);
	// otherwise it is LayerNorm.
	RMS bool
	// ModRows is the number of rows of the modulation (scale, shift [.., D]) per batch
	// row: the modulated form is y·(1 + scale) + shift, where x row r of batch row
	// b = r / RowsPerBatch reads modulation row b·ModRows + (r mod RowsPerBatch when
	// ModRows > 1). 0 means no modulation.
	ModRows, RowsPerBatch int
}

// RowNorm sets out to LayerNorm (or RMSNorm) of each row of x, times gamma [D] plus beta
// [D] (either may be nil; RMSNorm has no beta), then modulated when n.ModRows > 0 by
// scale and shift. out may be x.
func RowNorm(out, x, gamma, beta, scale, shift []float32, n RowNormShape) {
	if n.Rows <= 0 || n.D <= 0 || (n.ModRows > 0 && (n.RowsPerBatch <= 0 || n.Rows%n.RowsPerBatch != 0 ||
		(n.ModRows != 1 && n.ModRows != n.RowsPerBatch))) {
		panic(fmt.Errorf("kernels: row norm %+v", n))
	}
	parallel.For(n.Rows, max(1, 16384/n.D), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			src, dst := x[r*n.D:(r+1)*n.D], out[r*n.D:(r+1)*n.D]
			if n.RMS {
				var ss float64
				for _, v := range src {
					ss += float64(v) * float64(v)
				}
				inv := float32(1 / math.Sqrt(ss/float64(n.D)+n.Eps))
				for i, v := range src {
					dst[i] = v * inv
				}
			} else {
				mean, inv := meanInvStd(src, n.Eps)
				for i, v := range src {
					dst[i] = (v - mean) * inv
				}
			}
			if gamma != nil {
				for i, g := range gamma[:n.D] {
					dst[i] *= g
				}
			}
			if beta != nil {
				for i, b := range beta[:n.D] {
					dst[i] += b
				}
			}
			if n.ModRows > 0 {
				b, s := r/n.RowsPerBatch, r%n.RowsPerBatch
				m := b * n.ModRows
				if n.ModRows > 1 {
					m += s
				}
				sc, sh := scale[m*n.D:(m+1)*n.D], shift[m*n.D:(m+1)*n.D]
				for i := range dst {
					dst[i] = dst[i]*(1+sc[i]) + sh[i]
				}
			}
		}
	})
}

// ChannelRMSNormShape describes Wan's VAE norm on x [N, C, S]: each position's vector of C
// channels divided by its L2 norm (at least Eps), times √C·gamma[c].
type ChannelRMSNormShape struct {
	N, C, S int
	Eps     float64
	SiLU    bool
}

// ChannelRMSNorm sets out = x / max(‖x[n, :, p]‖₂, eps)·√C·gamma[c], then SiLU if s.SiLU.
// out may be x.
func ChannelRMSNorm(out, x, gamma []float32, s ChannelRMSNormShape) {
	if s.N <= 0 || s.C <= 0 || s.S <= 0 {
		panic(fmt.Errorf("kernels: channel RMS norm %+v", s))
	}
	const chunk = 512 // positions per unit: C rows of chunk values stay in cache
	chunks := (s.S + chunk - 1) / chunk
	rootC := math.Sqrt(float64(s.C))
	parallel.For(s.N*chunks, max(1, 16384/(s.C*chunk)), func(lo, hi int) {
		var ss [chunk]float64
		var inv [chunk]float32
		for u := lo; u < hi; u++ {
			n, p0 := u/chunks, (u%chunks)*chunk
			w := min(chunk, s.S-p0)
			clear(ss[:w])
			for c := range s.C {
				row := x[(n*s.C+c)*s.S+p0:][:w]
				for i, v := range row {
					ss[i] += float64(v) * float64(v)
				}
			}
			for i := range w {
				inv[i] = float32(1 / max(math.Sqrt(ss[i]), s.Eps))
			}
			for c := range s.C {
				off := (n*s.C+c)*s.S + p0
				src, dst := x[off:off+w], out[off:off+w]
				gc := float32(rootC * float64(gamma[c]))
				for i, v := range src {
					dst[i] = v * inv[i] * gc
				}
				if s.SiLU {
					SiLUSlice(dst, dst)
				}
			}
		}
	})
}

// affine sets dst[i] = (src[i] − mean)·a + b, then SiLU when silu (dst may be src).
func affine(dst, src []float32, mean, a, b float32, silu bool) {
	if vecExp {
		affineVec(dst, src, mean, a, b, silu)
		return
	}
	for i, v := range src {
		dst[i] = float32(float32((v-mean)*a) + b)
	}
	if silu {
		SiLUSlice(dst, dst)
	}
}
