package qgemm

import (
	"encoding/binary"
	"math"
)

// mr is the number of activation rows a kernel call covers (one tile).
const mr = 6

// aBlockBytes is the size of one 32-wide block of a quantized activation tile: the quants
// as [8 quads][mr rows][4], each row's scale da (float32), then each row's correction
// (Q8_0: −128·Σqa as int32; the k-quants: da·Σqa as float32).
const (
	aQuants     = 8 * mr * 4
	aScale      = aQuants
	aCorr       = aScale + 4*mr
	aBlockBytes = aCorr + 4*mr
)

// quantizeTile quantizes rows (≤ mr) rows of A, row r at a[r*lda:], k values each, into
// one tile of k/32 blocks (dst, k/32·aBlockBytes bytes), as ggml's vector quantize_row_q8_0
// does each block of 32: d = amax/127, q = x·(1/d) rounded to nearest, ties to even. Rows
// past rows are zero. intCorr selects Q8_0's correction (−128·Σq) over the k-quants' (d·Σq).
func quantizeTile(dst []byte, rows, k int, a []float32, lda int, intCorr bool) {
	nb := k / 32
	if rows < mr {
		clear(dst[:nb*aBlockBytes])
	}
	var q [32]int8
	for r := range rows {
		row := a[r*lda : r*lda+k]
		for b := range nb {
			x := row[b*32 : b*32+32]
			var amax float32
			for _, v := range x {
				amax = max(amax, float32(math.Abs(float64(v))))
			}
			d := amax / 127
			var id float32
			if d != 0 {
				id = 1 / d
			}
			var sum int32
			for i, v := range x {
				q[i] = int8(math.RoundToEven(float64(v * id)))
				sum += int32(q[i])
			}
			blk := dst[b*aBlockBytes : (b+1)*aBlockBytes]
			for t := range 8 {
				for i := range 4 {
					blk[t*mr*4+r*4+i] = byte(q[4*t+i])
				}
			}
			binary.LittleEndian.PutUint32(blk[aScale+4*r:], math.Float32bits(d))
			corr := uint32(-128 * sum)
			if !intCorr {
				corr = math.Float32bits(d * float32(sum))
			}
			binary.LittleEndian.PutUint32(blk[aCorr+4*r:], corr)
		}
	}
}
