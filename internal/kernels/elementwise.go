package kernels

import (
	"fmt"
	"math"

	"github.com/vdpp/vdpp/internal/parallel"
)

// elementGrain is the fewest elements an elementwise kernel gives a goroutine.
const elementGrain = 1 << 15

// BinaryOp is an elementwise operation of two operands.
type BinaryOp int

// The binary operations: a+b, a−b, a·b, a/b, max(a, b), min(a, b) (max and min return
// NaN if either is NaN, as XLA's and simplego's do).
const (
	Add BinaryOp = iota
	Sub
	Mul
	Div
	Max
	Min
)

// axis is one axis of a broadcast loop: its size and each operand's stride (0 when the
// operand is broadcast along it).
type axis struct{ n, sa, sb int }

// broadcastAxes merges the axes of out (dims) with operands of dims a and b (the same
// rank, each size equal to out's or 1) into as few loop axes as possible, the last
// innermost; every stride of the last axis is 0 or 1.
func broadcastAxes(dims, a, b []int) []axis {
	strides := func(d []int) []int {
		s := make([]int, len(d))
		st := 1
		for i := len(d) - 1; i >= 0; i-- {
			s[i] = st
			if d[i] == 1 {
				s[i] = 0
			}
			st *= d[i]
		}
		return s
	}
	sa, sb := strides(a), strides(b)
	var out []axis
	for i, n := range dims {
		if n == 1 {
			continue
		}
		if k := len(out) - 1; k >= 0 && out[k].sa == sa[i]*n && out[k].sb == sb[i]*n {
			out[k] = axis{out[k].n * n, sa[i], sb[i]}
			continue
		}
		out = append(out, axis{n, sa[i], sb[i]})
	}
	if len(out) == 0 {
		out = append(out, axis{1, 0, 0})
	}
	return out
}

// Binary sets out = op(a, b) elementwise with broadcasting: out has dims, a and b have
// dims aDims and bDims of the same rank, each size equal to out's or 1. out may be a or b
// when that operand has out's dims.
func Binary(op BinaryOp, out, a, b []float32, dims, aDims, bDims []int) {
	if len(aDims) != len(dims) || len(bDims) != len(dims) {
		panic(fmt.Sprintf("kernels: binary op on ranks %d, %d into %d", len(aDims), len(bDims), len(dims)))
	}
	ax := broadcastAxes(dims, aDims, bDims)
	inner := ax[len(ax)-1]
	outer := ax[:len(ax)-1]
	rows := 1
	for _, x := range outer {
		rows *= x.n
	}
	parallel.For(rows, max(1, elementGrain/inner.n), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			oa, ob, rem := 0, 0, r
			for i := len(outer) - 1; i >= 0; i-- {
				k := rem % outer[i].n
				rem /= outer[i].n
				oa += k * outer[i].sa
				ob += k * outer[i].sb
			}
			binaryRun(op, out[r*inner.n:(r+1)*inner.n], a[oa:], b[ob:], inner.sa, inner.sb)
		}
	})
}

// binaryRun sets dst[i] = op(a[i·sa], b[i·sb]) with sa, sb in {0, 1}.
func binaryRun(op BinaryOp, dst, a, b []float32, sa, sb int) {
	if vecExp && op <= Div && sa == 1 && len(dst) >= 8 {
		binaryVec(op, dst, a, b, sb == 0)
		return
	}
	binaryScalarLoop(op, dst, a, b, sa, sb)
}

// binaryScalarLoop is binaryRun in Go.
func binaryScalarLoop(op BinaryOp, dst, a, b []float32, sa, sb int) {
	n := len(dst)
	switch {
	case sa == 1 && sb == 1:
		a, b = a[:n], b[:n]
		switch op {
		case Add:
			for i := range dst {
				dst[i] = a[i] + b[i]
			}
		case Sub:
			for i := range dst {
				dst[i] = a[i] - b[i]
			}
		case Mul:
			for i := range dst {
				dst[i] = a[i] * b[i]
			}
		case Div:
			for i := range dst {
				dst[i] = a[i] / b[i]
			}
		default:
			for i := range dst {
				dst[i] = minMax(op, a[i], b[i])
			}
		}
	case sa == 1:
		a, s := a[:n], b[0]
		switch op {
		case Add:
			for i := range dst {
				dst[i] = a[i] + s
			}
		case Sub:
			for i := range dst {
				dst[i] = a[i] - s
			}
		case Mul:
			for i := range dst {
				dst[i] = a[i] * s
			}
		case Div:
			for i := range dst {
				dst[i] = a[i] / s
			}
		default:
			for i := range dst {
				dst[i] = minMax(op, a[i], s)
			}
		}
	case sb == 1:
		s, b := a[0], b[:n]
		switch op {
		case Add:
			for i := range dst {
				dst[i] = s + b[i]
			}
		case Sub:
			for i := range dst {
				dst[i] = s - b[i]
			}
		case Mul:
			for i := range dst {
				dst[i] = s * b[i]
			}
		case Div:
			for i := range dst {
				dst[i] = s / b[i]
			}
		default:
			for i := range dst {
				dst[i] = minMax(op, s, b[i])
			}
		}
	default:
		var v float32
		switch op {
		case Add:
			v = a[0] + b[0]
		case Sub:
			v = a[0] - b[0]
		case Mul:
			v = a[0] * b[0]
		case Div:
			v = a[0] / b[0]
		default:
			v = minMax(op, a[0], b[0])
		}
		for i := range dst {
			dst[i] = v
		}
	}
}

func minMax(op BinaryOp, a, b float32) float32 {
	if a != a || b != b {
		return float32(math.NaN())
	}
	if (op == Max) == (a > b) {
		return a
	}
	return b
}

// UnaryOp is an elementwise function of one operand.
type UnaryOp int

// The unary functions (float32 Exp, Sigmoid, Erf and Tanh of this package).
const (
	ExpOp UnaryOp = iota
	SigmoidOp
	ErfOp
	TanhOp
)

// Unary sets out[i] = op(in[i]) over all cores; out may be in.
func Unary(op UnaryOp, out, in []float32) {
	n := len(in)
	const chunk = 4096
	parallel.For((n+chunk-1)/chunk, max(1, elementGrain/chunk), func(lo, hi int) {
		src, dst := in[lo*chunk:min(n, hi*chunk)], out[lo*chunk:min(n, hi*chunk)]
		switch op {
		case ExpOp:
			ExpSlice(dst, src)
		case SigmoidOp:
			SigmoidSlice(dst, src)
		case ErfOp:
			ErfSlice(dst, src)
		case TanhOp:
			TanhSlice(dst, src)
		}
	})
}

// Transpose sets out to in (dims) with its axes permuted: out axis i is in axis perm[i].
func Transpose(out, in []float32, dims, perm []int) {
	rank := len(dims)
	inStride := make([]int, rank)
	st := 1
	for i := rank - 1; i >= 0; i-- {
		inStride[i] = st
		st *= dims[i]
	}
	// Output axes (outer to inner) with their input strides, size-1 axes dropped and
	// axes that stay adjacent merged.
	type ax struct{ n, s int }
	var axes []ax
	for _, p := range perm {
		n, s := dims[p], inStride[p]
		if n == 1 {
			continue
		}
		if k := len(axes) - 1; k >= 0 && axes[k].s == s*n {
			axes[k] = ax{axes[k].n * n, s}
			continue
		}
		axes = append(axes, ax{n, s})
	}
	if len(axes) == 0 {
		copy(out, in[:st])
		return
	}
	inner := axes[len(axes)-1]
	outer := axes[:len(axes)-1]
	rows := 1
	for _, a := range outer {
		rows *= a.n
	}
	if inner.s == 1 { // contiguous runs
		parallel.For(rows, max(1, elementGrain/inner.n), func(lo, hi int) {
			for r := lo; r < hi; r++ {
				off, rem := 0, r
				for i := len(outer) - 1; i >= 0; i-- {
					off += (rem % outer[i].n) * outer[i].s
					rem /= outer[i].n
				}
				copy(out[r*inner.n:(r+1)*inner.n], in[off:off+inner.n])
			}
		})
		return
	}
	// The inner output axis is strided in the input: find the output axis that is
	// contiguous in the input (stride 1) and move tiles of 16 x 16 between them, so that
	// both sides read and write cache lines whole.
	j := -1
	for i, a := range outer {
		if a.s == 1 {
			j = i
		}
	}
	if j < 0 {
		parallel.For(rows, max(1, elementGrain/inner.n), func(lo, hi int) {
			for r := lo; r < hi; r++ {
				off, rem := 0, r
				for i := len(outer) - 1; i >= 0; i-- {
					off += (rem % outer[i].n) * outer[i].s
					rem /= outer[i].n
				}
				dst := out[r*inner.n : (r+1)*inner.n]
				for i := range dst {
					dst[i] = in[off+i*inner.s]
				}
			}
		})
		return
	}
	// Rows of the output that differ only in axis j form a [outer[j].n, inner.n] block;
	// iterate the blocks and tile each.
	nj := outer[j].n
	outStrideJ := inner.n
	for i := j + 1; i < len(outer); i++ {
		outStrideJ *= outer[i].n
	}
	blocks := rows / nj
	const tile = 16
	parallel.For(blocks, max(1, elementGrain/(nj*inner.n)), func(lo, hi int) {
		for blk := lo; blk < hi; blk++ {
			// blk enumerates the outer axes other than j.
			inOff, outOff, rem := 0, 0, blk
			mult := inner.n
			for i := len(outer) - 1; i >= 0; i-- {
				if i == j {
					mult *= nj
					continue
				}
				k := rem % outer[i].n
				rem /= outer[i].n
				inOff += k * outer[i].s
				outOff += k * mult
				mult *= outer[i].n
			}
			for a0 := 0; a0 < nj; a0 += tile {
				for b0 := 0; b0 < inner.n; b0 += tile {
					for a := a0; a < min(a0+tile, nj); a++ {
						dst := out[outOff+a*outStrideJ:]
						for bb := b0; bb < min(b0+tile, inner.n); bb++ {
							dst[bb] = in[inOff+a+bb*inner.s]
						}
					}
				}
			}
		}
	})
}
