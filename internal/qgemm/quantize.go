package qgemm

import (
	"encoding/binary"
	"math"
)

// mr is the number of activation rows a kernel call covers (one tile).
const mr = 6

// A quantized activation tile holds mr rows as blocks of 32 values, in one of two forms.
//
// The narrow form (the k-quants' products) is ggml's q8_0 of each block: d = amax/127 and
// q = x/d rounded, 8 bits. A block: the quants as [8 quads][mr rows][4] int8, each row's d
// (float32), then each row's d·Σq (float32).
//
// The wide form (Q8_0's products) has 16 bits: e = d/254 and Q = x/e rounded (|Q| ≤ 32258),
// stored as two int8 digits Q = 254·hi + lo (hi = ⌊(Q+127)/254⌋, lo in [−127, 126]) so that
// the kernel's byte products give Σ w·Q exactly (254·Σ w·hi + Σ w·lo). A block: the hi
// quads, the lo quads (each [8][mr][4]), each row's e (float32), −128·Σhi and −128·Σlo
// (int32: the weights are stored as w+128).
const (
	aQuants = 8 * mr * 4

	nScale = aQuants       // narrow: d
	nCorr  = nScale + 4*mr // narrow: d·Σq
	nBlock = nCorr + 4*mr  // narrow block bytes
	wLo    = aQuants       // wide: lo quads
	wScale = wLo + aQuants // wide: e
	wCorr1 = wScale + 4*mr // wide: −128·Σhi
	wCorr2 = wCorr1 + 4*mr // wide: −128·Σlo
	wBlock = wCorr2 + 4*mr // wide block bytes
)

// blockBytes is the size of one block of a tile in the wide or narrow form.
func blockBytes(wide bool) int {
	if wide {
		return wBlock
	}
	return nBlock
}

// quantizeTile quantizes rows (≤ mr) rows of A, row r at a[r*lda:], k values each, into
// one tile of k/32 blocks (dst) in the wide or narrow form. d = amax/127 as ggml's vector
// quantize_row_q8_0 computes it; every rounding is to nearest, ties to even. Rows past rows
// are zero.
func quantizeTile(dst []byte, rows, k int, a []float32, lda int, wide bool) {
	nb, bb := k/32, blockBytes(wide)
	if rows < mr {
		clear(dst[:nb*bb])
	}
	var hi, lo [32]int8
	for r := range rows {
		row := a[r*lda : r*lda+k]
		for b := range nb {
			x := row[b*32 : b*32+32]
			var amax float32
			for _, v := range x {
				amax = max(amax, float32(math.Abs(float64(v))))
			}
			d := amax / 127
			blk := dst[b*bb : (b+1)*bb]
			put := func(off int, q *[32]int8) {
				for t := range 8 {
					for i := range 4 {
						blk[off+t*mr*4+r*4+i] = byte(q[4*t+i])
					}
				}
			}
			if !wide {
				var id float32
				if d != 0 {
					id = 1 / d
				}
				var sum int32
				for i, v := range x {
					hi[i] = int8(math.RoundToEven(float64(v * id)))
					sum += int32(hi[i])
				}
				put(0, &hi)
				binary.LittleEndian.PutUint32(blk[nScale+4*r:], math.Float32bits(d))
				binary.LittleEndian.PutUint32(blk[nCorr+4*r:], math.Float32bits(d*float32(sum)))
				continue
			}
			e := d / 254
			var ie float32
			if e != 0 {
				ie = 1 / e
			}
			var s1, s2 int32
			for i, v := range x {
				q := int32(math.RoundToEven(float64(v * ie)))
				h := floorDiv(q+127, 254)
				hi[i], lo[i] = int8(h), int8(q-254*h)
				s1 += h
				s2 += q - 254*h
			}
			put(0, &hi)
			put(wLo, &lo)
			binary.LittleEndian.PutUint32(blk[wScale+4*r:], math.Float32bits(e))
			binary.LittleEndian.PutUint32(blk[wCorr1+4*r:], uint32(-128*s1))
			binary.LittleEndian.PutUint32(blk[wCorr2+4*r:], uint32(-128*s2))
		}
	}
}

// floorDiv is ⌊a/b⌋ for b > 0.
func floorDiv(a, b int32) int32 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}
