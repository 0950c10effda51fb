package transformer

import (
	"fmt"
	"math"
)

// ropeTheta is the base of WanRotaryPosEmbed's frequencies.
const ropeTheta = 10000.0

// ropeAxisDims is WanRotaryPosEmbed's construction-time split of head dim d into the
// frame, row and column tables: h = w = 2·(d/6), t = d − h − w (for d = 128: 44, 42, 42).
func ropeAxisDims(d int) [3]int {
	hw := 2 * (d / 6)
	return [3]int{d - 2*hw, hw, hw}
}

// ropeForwardSplit is the split WanRotaryPosEmbed.forward applies to the concatenated
// tables: [d − 2·(d/3), d/3, d/3]. It equals ropeAxisDims(d) when d mod 6 < 3 (every real
// Wan config); otherwise diffusers indexes some columns of one axis's table by another
// axis's position, and so does this port, because parity is with the code as it runs.
func ropeForwardSplit(d int) [3]int {
	third := d / 3
	return [3]int{d - 2*third, third, third}
}

// RopeTables returns diffusers' per-token rotary tables for a latent grid of f×h×w tokens
// (after patching), in token order (frame, row, column; column fastest): cos and sin, each
// [f·h·w, d] row-major with d the head dim. Each axis's frequencies are
// 1/10000^(2j/dim_axis), its angles position·frequency, both in float64, and the cos/sin
// values are rounded to float32 and repeated twice (columns 2j and 2j+1), exactly as
// get_1d_rotary_pos_embed(freqs_dtype=float64, repeat_interleave_real=True) computes them.
func RopeTables(cfg Config, f, h, w int) (cos, sin []float32, err error) {
	for i, n := range [3]int{f, h, w} {
		if n <= 0 || n > cfg.RopeMaxSeqLen {
			return nil, nil, fmt.Errorf("%w: %d patches along %s, the rotary tables hold 1..%d (rope_max_seq_len)",
				ErrInput, n, [3]string{"frames", "height", "width"}[i], cfg.RopeMaxSeqLen)
		}
	}
	d := cfg.AttentionHeadDim
	axes := ropeAxisDims(d)
	// colFreq[c]: the frequency of column c of the concatenated construction-time table.
	colFreq := make([]float64, 0, d)
	for _, dim := range axes {
		for j := 0; j < dim/2; j++ {
			fr := 1.0 / math.Pow(ropeTheta, float64(2*j)/float64(dim))
			colFreq = append(colFreq, fr, fr)
		}
	}
	split := ropeForwardSplit(d)
	colAxis := make([]int, d) // which position (0 frame, 1 row, 2 column) indexes column c
	for c := range colAxis {
		switch {
		case c < split[0]:
			colAxis[c] = 0
		case c < split[0]+split[1]:
			colAxis[c] = 1
		default:
			colAxis[c] = 2
		}
	}
	n := f * h * w
	cos = make([]float32, n*d)
	sin = make([]float32, n*d)
	tok := 0
	for fi := range f {
		for hi := range h {
			for wi := range w {
				pos := [3]int{fi, hi, wi}
				row := tok * d
				for c := range d {
					a := float64(pos[colAxis[c]]) * colFreq[c]
					cos[row+c] = float32(math.Cos(a))
					sin[row+c] = float32(math.Sin(a))
				}
				tok++
			}
		}
	}
	return cos, sin, nil
}

// ropePairs returns what apply_rotary_emb reads of the tables: cos at the even columns and
// sin at the odd columns, each [n, d/2].
func ropePairs(cos, sin []float32, n, d int) (cosEven, sinOdd []float32) {
	half := d / 2
	cosEven = make([]float32, n*half)
	sinOdd = make([]float32, n*half)
	for t := range n {
		for k := range half {
			cosEven[t*half+k] = cos[t*d+2*k]
			sinOdd[t*half+k] = sin[t*d+2*k+1]
		}
	}
	return cosEven, sinOdd
}
