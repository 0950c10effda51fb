package qgemm

import (
	"encoding/binary"
	"math"
)

// The portable kernels: c[r*ldc+j] = Σ over the nb blocks of 32, in order, of the block's
// contribution to row r of the tile and column j of the panel, every float step rounded
// (multiply, then add: no fused multiply-add, whatever GOAMD64 allows).

func f32at(b []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b)) }

// kernelQ8_0Go: per block, acc += float(Σ u·qa − 128·Σqa)·(da·d).
func kernelQ8_0Go(nb int, a, w []byte, c []float32, ldc int) {
	l := layouts[Q8_0]
	var acc [mr][PanelCols]float32
	var d [PanelCols]float32
	for b := range nb {
		ab := a[b*aBlockBytes : (b+1)*aBlockBytes]
		wb := w[b*l.panelBytes : (b+1)*l.panelBytes]
		for j := range d {
			d[j] = half(wb[2*j:])
		}
		q := wb[64:]
		for r := range mr {
			da := f32at(ab[aScale+4*r:])
			corr := int32(binary.LittleEndian.Uint32(ab[aCorr+4*r:]))
			for j := range PanelCols {
				s := corr
				for t := range 8 {
					qa := ab[t*mr*4+r*4 : t*mr*4+r*4+4]
					qw := q[t*PanelCols*4+j*4 : t*PanelCols*4+j*4+4]
					s += int32(int8(qa[0]))*int32(qw[0]) + int32(int8(qa[1]))*int32(qw[1]) +
						int32(int8(qa[2]))*int32(qw[2]) + int32(int8(qa[3]))*int32(qw[3])
				}
				scale := da * d[j]
				acc[r][j] = float32(acc[r][j] + float32(float32(s)*scale))
			}
		}
	}
	store(acc[:], c, ldc)
}

// kernelQ4_KGo: per sub-block s of 32, acc += float(Σ u·qa)·(da·D) − (da·Σqa)·M with
// D = d·sc_s and M = dmin·m_s as ggml's dequantize_row_q4_K computes them.
func kernelQ4_KGo(nb int, a, w []byte, c []float32, ldc int) {
	l := layouts[Q4_K]
	var acc [mr][PanelCols]float32
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
			ab := a[(sb*8+s)*aBlockBytes : (sb*8+s+1)*aBlockBytes]
			q := wb[q4kQ+s*512:]
			for r := range mr {
				da := f32at(ab[aScale+4*r:])
				corr := f32at(ab[aCorr+4*r:])
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

func store(acc [][PanelCols]float32, c []float32, ldc int) {
	for r := range acc {
		copy(c[r*ldc:r*ldc+PanelCols], acc[r][:])
	}
}
