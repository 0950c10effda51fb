package qgemm

import (
	"encoding/binary"
	"math"
)

// The portable kernels: c[r*ldc+j] = Σ over the nb blocks of 32, in order, of the block's
// contribution to row r of the tile and column j of the panel (continuing from C's value
// with cont), every float step rounded (multiply, then add: no fused multiply-add,
// whatever GOAMD64 allows).

func f32at(b []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b)) }

// kernelQ8_0Go: per block, acc += float(Σ w·Q)·(e·d) with the activations in the wide
// form (Q = 254·hi + lo; the weights stored as w+128, corrected by the tile's −128·Σ).
func kernelQ8_0Go(nb int, a, w []byte, c []float32, ldc int, cont bool) {
	l := layouts[Q8_0]
	acc := load(c, ldc, cont)
	var d [PanelCols]float32
	for b := range nb {
		ab := a[b*wBlock : (b+1)*wBlock]
		wb := w[b*l.panelBytes : (b+1)*l.panelBytes]
		for j := range d {
			d[j] = half(wb[2*j:])
		}
		q := wb[64:]
		for r := range mr {
			e := f32at(ab[wScale+4*r:])
			c1 := int32(binary.LittleEndian.Uint32(ab[wCorr1+4*r:]))
			c2 := int32(binary.LittleEndian.Uint32(ab[wCorr2+4*r:]))
			for j := range PanelCols {
				s1, s2 := c1, c2
				for t := range 8 {
					hi := ab[t*mr*4+r*4 : t*mr*4+r*4+4]
					lo := ab[wLo+t*mr*4+r*4 : wLo+t*mr*4+r*4+4]
					qw := q[t*PanelCols*4+j*4 : t*PanelCols*4+j*4+4]
					for i := range 4 {
						s1 += int32(int8(hi[i])) * int32(qw[i])
						s2 += int32(int8(lo[i])) * int32(qw[i])
					}
				}
				scale := e * d[j]
				acc[r][j] = float32(acc[r][j] + float32(float32(254*s1+s2)*scale))
			}
		}
	}
	store(acc[:], c, ldc)
}

// kernelQ4_KGo: per sub-block s of 32, acc += float(Σ u·qa)·(da·D) − (da·Σqa)·M with
// D = d·sc_s and M = dmin·m_s as ggml's dequantize_row_q4_K computes them.
func kernelQ4_KGo(nb int, a, w []byte, c []float32, ldc int, cont bool) {
	l := layouts[Q4_K]
	acc := load(c, ldc, cont)
	var dd, dmin, D, M [PanelCols]float32
	for sb := range nb / 8 {
		wb := w[sb*l.panelBytes : (sb+1)*l.panelBytes]
		for j := range PanelCols {
			dd[j], dmin[j] = half(wb[2*j:]), half(wb[64+2*j:])
		}
		for s := range 8 {
			for j := range PanelCols {
				D[j] = dd[j] * float32(wb[q4kSc+s*PanelCols+j])
				M[j] = dmin[j] * float32(wb[q4kM+s*PanelCols+j])
			}
			ab := a[(sb*8+s)*nBlock : (sb*8+s+1)*nBlock]
			q := wb[q4kQ+s*512:]
			for r := range mr {
				da := f32at(ab[nScale+4*r:])
				corr := f32at(ab[nCorr+4*r:])
				for j := range PanelCols {
					var sum int32
					for t := range 4 {
						lo := ab[2*t*mr*4+r*4 : 2*t*mr*4+r*4+4]
						hi := ab[(2*t+1)*mr*4+r*4 : (2*t+1)*mr*4+r*4+4]
						qw := q[t*PanelCols*4+j*4 : t*PanelCols*4+j*4+4]
						for i := range 4 {
							sum += int32(int8(lo[i]))*int32(qw[i]&0xF) + int32(int8(hi[i]))*int32(qw[i]>>4)
						}
					}
					scale := da * D[j]
					v := float32(acc[r][j] + float32(float32(sum)*scale))
					acc[r][j] = float32(v - float32(corr*M[j]))
				}
			}
		}
	}
	store(acc[:], c, ldc)
}

// load returns the tile's starting sums: C's values when continuing, else zero.
func load(c []float32, ldc int, cont bool) (acc [mr][PanelCols]float32) {
	if cont {
		for r := range acc {
			copy(acc[r][:], c[r*ldc:r*ldc+PanelCols])
		}
	}
	return acc
}

func store(acc [][PanelCols]float32, c []float32, ldc int) {
	for r := range acc {
		copy(c[r*ldc:r*ldc+PanelCols], acc[r][:])
	}
}
