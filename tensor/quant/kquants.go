package quant

import (
	"encoding/binary"
	"math"
)

// The k-quants: super-blocks of 256 weights, ggml-quants.c's quantize_row_q{2..6}_K_ref
// (the reference quantizers, no importance matrix: what stable-diffusion.cpp's convert and
// llama.cpp's quantize run without one) and dequantize_row_q{2..6}_K, operation for operation
// in float32, every product rounded before it is added (see blocks32.go).

const qkK = 256 // weights in a super-block

const groupMaxEps = 1e-15

// nearestInt is ggml's nearest_int: round to nearest, ties to even, through the float32
// magic number 1.5*2^23 (valid for |f| <= 4194303, as ggml asserts; other values give
// ggml's bits without the assertion).
func nearestInt(f float32) int32 {
	v := float32(f) + 12582912
	i := int32(math.Float32bits(v))
	return (i & 0x007fffff) - 0x00400000
}

func sqrt32(v float32) float32 { return float32(math.Sqrt(float64(v))) }

// makeQXQuants is make_qx_quants with qw == NULL.
func makeQXQuants(n, nmax int, x []float32, L []int8, rmseType int) float32 {
	var max, amax float32
	for i := 0; i < n; i++ {
		if ax := abs32(x[i]); ax > amax {
			amax, max = ax, x[i]
		}
	}
	if amax < groupMaxEps {
		for i := 0; i < n; i++ {
			L[i] = 0
		}
		return 0
	}
	fnmax := float32(nmax)
	iscale := -fnmax / max
	if rmseType == 0 {
		for i := 0; i < n; i++ {
			l := nearestInt(float32(iscale * x[i]))
			L[i] = int8(int32(nmax) + clamp32(l, -int32(nmax), int32(nmax)-1))
		}
		return 1 / iscale
	}
	returnEarly := false
	if rmseType < 0 {
		rmseType = -rmseType
		returnEarly = true
	}
	weight := func(v float32) float32 {
		switch rmseType {
		case 1:
			return v * v
		case 2:
			return 1
		case 3:
			return abs32(v)
		default:
			return sqrt32(abs32(v))
		}
	}
	var sumlx, suml2 float32
	for i := 0; i < n; i++ {
		l := clamp32(nearestInt(float32(iscale*x[i])), -int32(nmax), int32(nmax)-1)
		L[i] = int8(l + int32(nmax))
		w := weight(x[i])
		fl := float32(l)
		sumlx += float32(float32(w*x[i]) * fl)
		suml2 += float32(float32(w*fl) * fl)
	}
	var scale float32
	if suml2 != 0 {
		scale = sumlx / suml2
	}
	if returnEarly {
		if suml2 > 0 {
			return 0.5 * (scale + 1/iscale)
		}
		return 1 / iscale
	}
	best := scale * sumlx
	for is := -9; is <= 9; is++ {
		if is == 0 {
			continue
		}
		iscale = -(fnmax + float32(0.1*float32(is))) / max
		sumlx, suml2 = 0, 0
		for i := 0; i < n; i++ {
			l := clamp32(nearestInt(float32(iscale*x[i])), -int32(nmax), int32(nmax)-1)
			w := weight(x[i])
			fl := float32(l)
			sumlx += float32(float32(w*x[i]) * fl)
			suml2 += float32(float32(w*fl) * fl)
		}
		if suml2 > 0 && float32(sumlx*sumlx) > float32(best*suml2) {
			for i := 0; i < n; i++ {
				l := nearestInt(float32(iscale * x[i]))
				L[i] = int8(int32(nmax) + clamp32(l, -int32(nmax), int32(nmax)-1))
			}
			scale = sumlx / suml2
			best = scale * sumlx
		}
	}
	return scale
}

// clamp32 is MAX(lo, MIN(hi, v)).
func clamp32(v, lo, hi int32) int32 {
	if v > hi {
		v = hi
	}
	if v < lo {
		v = lo
	}
	return v
}

// makeQ3Quants is make_q3_quants.
func makeQ3Quants(n, nmax int, x []float32, L []int8, doRMSE bool) float32 {
	var max, amax float32
	for i := 0; i < n; i++ {
		if ax := abs32(x[i]); ax > amax {
			amax, max = ax, x[i]
		}
	}
	if amax < groupMaxEps {
		for i := 0; i < n; i++ {
			L[i] = 0
		}
		return 0
	}
	iscale := -float32(nmax) / max
	lo, hi := -int32(nmax), int32(nmax)-1
	if doRMSE {
		var sumlx, suml2 float32
		for i := 0; i < n; i++ {
			l := clamp32(nearestInt(float32(iscale*x[i])), lo, hi)
			L[i] = int8(l)
			w := float32(x[i] * x[i])
			fl := float32(l)
			sumlx += float32(float32(w*x[i]) * fl)
			suml2 += float32(float32(w*fl) * fl)
		}
		for itry := 0; itry < 5; itry++ {
			changed := 0
			for i := 0; i < n; i++ {
				w := float32(x[i] * x[i])
				li := float32(L[i])
				slx := sumlx - float32(float32(w*x[i])*li)
				if slx > 0 {
					sl2 := suml2 - float32(float32(w*li)*li)
					newL := clamp32(nearestInt(float32(float32(x[i]*sl2)/slx)), lo, hi)
					if newL != int32(L[i]) {
						fn := float32(newL)
						slx += float32(float32(w*x[i]) * fn)
						sl2 += float32(float32(w*fn) * fn)
						if sl2 > 0 && float32(float32(slx*slx)*suml2) > float32(float32(sumlx*sumlx)*sl2) {
							L[i] = int8(newL)
							sumlx, suml2 = slx, sl2
							changed++
						}
					}
				}
			}
			if changed == 0 {
				break
			}
		}
		for i := 0; i < n; i++ {
			L[i] += int8(nmax)
		}
		if suml2 > 0 {
			return sumlx / suml2
		}
		return 0
	}
	for i := 0; i < n; i++ {
		l := clamp32(nearestInt(float32(iscale*x[i])), lo, hi)
		L[i] = int8(l + int32(nmax))
	}
	return 1 / iscale
}

// makeQKX2Quants is make_qkx2_quants; it returns the scale and sets *theMin.
func makeQKX2Quants(n, nmax int, x, weights []float32, L, Laux []uint8, theMin *float32,
	rmin, rdelta float32, nstep int, useMAD bool) float32 {
	lo, hi := x[0], x[0]
	sumW := weights[0]
	sumX := float32(sumW * x[0])
	for i := 1; i < n; i++ {
		if x[i] < lo {
			lo = x[i]
		}
		if x[i] > hi {
			hi = x[i]
		}
		w := weights[i]
		sumW += w
		sumX += float32(w * x[i])
	}
	if lo > 0 {
		lo = 0
	}
	if hi == lo {
		for i := 0; i < n; i++ {
			L[i] = 0
		}
		*theMin = -lo
		return 0
	}
	fnmax := float32(nmax)
	iscale := fnmax / (hi - lo)
	scale := 1 / iscale
	errOf := func(diff float32) float32 {
		if useMAD {
			return abs32(diff)
		}
		return diff * diff
	}
	var bestError float32
	for i := 0; i < n; i++ {
		l := nearestInt(float32(iscale * float32(x[i]-lo)))
		L[i] = uint8(clamp32(l, 0, int32(nmax)))
		diff := float32(float32(float32(scale*float32(L[i]))+lo) - x[i])
		bestError += float32(weights[i] * errOf(diff))
	}
	if nstep < 1 {
		*theMin = -lo
		return scale
	}
	for is := 0; is <= nstep; is++ {
		iscale = float32(float32(rmin+float32(rdelta*float32(is)))+fnmax) / (hi - lo)
		var sumL, sumL2, sumXL float32
		for i := 0; i < n; i++ {
			l := clamp32(nearestInt(float32(iscale*float32(x[i]-lo))), 0, int32(nmax))
			Laux[i] = uint8(l)
			w := weights[i]
			fl := float32(l)
			sumL += float32(w * fl)
			sumL2 += float32(float32(w*fl) * fl)
			sumXL += float32(float32(w*fl) * x[i])
		}
		D := float32(sumW*sumL2) - float32(sumL*sumL)
		if D > 0 {
			thisScale := (float32(sumW*sumXL) - float32(sumX*sumL)) / D
			thisMin := (float32(sumL2*sumX) - float32(sumL*sumXL)) / D
			if thisMin > 0 {
				thisMin = 0
				thisScale = sumXL / sumL2
			}
			var curError float32
			for i := 0; i < n; i++ {
				diff := float32(float32(float32(thisScale*float32(Laux[i]))+thisMin) - x[i])
				curError += float32(weights[i] * errOf(diff))
			}
			if curError < bestError {
				copy(L[:n], Laux[:n])
				bestError = curError
				scale = thisScale
				lo = thisMin
			}
		}
	}
	*theMin = -lo
	return scale
}

// getScaleMinK4 is get_scale_min_k4: the 6-bit scale and min j of a q4_K/q5_K block.
func getScaleMinK4(j int, q []byte) (d, m uint8) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&0xf | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

// Q2_K: scales[16] (low nibble scale, high nibble min), qs[64], d, dmin.
func quantizeQ2_K(dst []byte, x []float32) {
	var L [qkK]uint8
	var Laux [16]uint8
	var weights [16]float32
	var mins, scales [qkK / 16]float32
	const q4scale = 15
	for i := 0; i < len(x)/qkK; i++ {
		xb, y := x[i*qkK:(i+1)*qkK], dst[i*84:(i+1)*84]
		ysc, yqs := y[0:16], y[16:80]
		var maxScale, maxMin float32
		for j := 0; j < qkK/16; j++ {
			for l := 0; l < 16; l++ {
				weights[l] = abs32(xb[16*j+l])
			}
			scales[j] = makeQKX2Quants(16, 3, xb[16*j:], weights[:], L[16*j:], Laux[:], &mins[j], -0.5, 0.1, 15, true)
			if scales[j] > maxScale {
				maxScale = scales[j]
			}
			if mins[j] > maxMin {
				maxMin = mins[j]
			}
		}
		if maxScale > 0 {
			iscale := q4scale / maxScale
			for j := 0; j < qkK/16; j++ {
				ysc[j] = uint8(nearestInt(float32(iscale * scales[j])))
			}
			putFP16(y[80:], maxScale/q4scale)
		} else {
			for j := range ysc {
				ysc[j] = 0
			}
			putFP16(y[80:], 0)
		}
		if maxMin > 0 {
			iscale := q4scale / maxMin
			for j := 0; j < qkK/16; j++ {
				ysc[j] |= uint8(nearestInt(float32(iscale*mins[j])) << 4)
			}
			putFP16(y[82:], maxMin/q4scale)
		} else {
			putFP16(y[82:], 0)
		}
		for j := 0; j < qkK/16; j++ {
			d := fp16(y[80:]) * float32(ysc[j]&0xf)
			if d == 0 {
				continue
			}
			dm := fp16(y[82:]) * float32(ysc[j]>>4)
			for ii := 0; ii < 16; ii++ {
				l := nearestInt(float32(xb[16*j+ii]+dm) / d)
				L[16*j+ii] = uint8(clamp32(l, 0, 3))
			}
		}
		for j := 0; j < qkK; j += 128 {
			for l := 0; l < 32; l++ {
				yqs[j/4+l] = L[j+l] | L[j+l+32]<<2 | L[j+l+64]<<4 | L[j+l+96]<<6
			}
		}
	}
}

func dequantizeQ2_K(dst []float32, src []byte) {
	for i := 0; i < len(dst)/qkK; i++ {
		b, y := src[i*84:(i+1)*84], dst[i*qkK:(i+1)*qkK]
		sc, q := b[0:16], b[16:80]
		d, dmin := fp16(b[80:]), fp16(b[82:])
		is, o := 0, 0
		for n := 0; n < qkK; n += 128 {
			shift := 0
			for j := 0; j < 4; j++ {
				for half := 0; half < 2; half++ {
					s := sc[is]
					is++
					dl, ml := d*float32(s&0xf), dmin*float32(s>>4)
					for l := 0; l < 16; l++ {
						y[o] = float32(dl*float32((q[l+16*half]>>shift)&3)) - ml
						o++
					}
				}
				shift += 2
			}
			q = q[32:]
		}
	}
}

// Q3_K: hmask[32], qs[64], scales[12] (16 6-bit scales), d.
func quantizeQ3_K(dst []byte, x []float32) {
	var L [qkK]int8
	var scales [qkK / 16]float32
	for i := 0; i < len(x)/qkK; i++ {
		xb, y := x[i*qkK:(i+1)*qkK], dst[i*110:(i+1)*110]
		hmask, qs, ysc := y[0:32], y[32:96], y[96:108]
		var maxScale, amax float32
		for j := 0; j < qkK/16; j++ {
			scales[j] = makeQ3Quants(16, 4, xb[16*j:], L[16*j:], true)
			if s := abs32(scales[j]); s > amax {
				amax, maxScale = s, scales[j]
			}
		}
		for j := range ysc {
			ysc[j] = 0
		}
		if maxScale != 0 {
			iscale := -32 / maxScale
			for j := 0; j < qkK/16; j++ {
				l := int8(nearestInt(float32(iscale * scales[j])))
				l = int8(clamp32(int32(l), -32, 31)) + 32
				if j < 8 {
					ysc[j] = uint8(l) & 0xf
				} else {
					ysc[j-8] |= (uint8(l) & 0xf) << 4
				}
				l >>= 4
				ysc[j%4+8] |= uint8(l) << (2 * (j / 4))
			}
			putFP16(y[108:], 1/iscale)
		} else {
			putFP16(y[108:], 0)
		}
		for j := 0; j < qkK/16; j++ {
			var sc int8
			if j < 8 {
				sc = int8(ysc[j] & 0xf)
			} else {
				sc = int8(ysc[j-8] >> 4)
			}
			sc = int8(uint8(sc)|((ysc[8+j%4]>>(2*(j/4)))&3)<<4) - 32
			d := fp16(y[108:]) * float32(sc)
			if d == 0 {
				continue
			}
			for ii := 0; ii < 16; ii++ {
				l := clamp32(nearestInt(xb[16*j+ii]/d), -4, 3)
				L[16*j+ii] = int8(l + 4)
			}
		}
		for j := range hmask {
			hmask[j] = 0
		}
		m, hm := 0, uint8(1)
		for j := 0; j < qkK; j++ {
			if L[j] > 3 {
				hmask[m] |= hm
				L[j] -= 4
			}
			if m++; m == qkK/8 {
				m, hm = 0, hm<<1
			}
		}
		for j := 0; j < qkK; j += 128 {
			for l := 0; l < 32; l++ {
				qs[j/4+l] = uint8(L[j+l]) | uint8(L[j+l+32])<<2 | uint8(L[j+l+64])<<4 | uint8(L[j+l+96])<<6
			}
		}
	}
}

func dequantizeQ3_K(dst []float32, src []byte) {
	const kmask1, kmask2 = 0x03030303, 0x0f0f0f0f
	var aux [4]uint32
	var scales [16]int8
	for i := 0; i < len(dst)/qkK; i++ {
		b, y := src[i*110:(i+1)*110], dst[i*qkK:(i+1)*qkK]
		hm, q := b[0:32], b[32:96]
		dAll := fp16(b[108:])
		aux[0] = binary.LittleEndian.Uint32(b[96:])
		aux[1] = binary.LittleEndian.Uint32(b[100:])
		aux[2] = binary.LittleEndian.Uint32(b[104:])
		tmp := aux[2]
		aux[2] = (aux[0]>>4)&kmask2 | ((tmp>>4)&kmask1)<<4
		aux[3] = (aux[1]>>4)&kmask2 | ((tmp>>6)&kmask1)<<4
		aux[0] = aux[0]&kmask2 | (tmp&kmask1)<<4
		aux[1] = aux[1]&kmask2 | ((tmp>>2)&kmask1)<<4
		for k, a := range aux {
			for by := 0; by < 4; by++ {
				scales[4*k+by] = int8(a >> (8 * by))
			}
		}
		is, o := 0, 0
		m := uint8(1)
		for n := 0; n < qkK; n += 128 {
			shift := 0
			for j := 0; j < 4; j++ {
				for half := 0; half < 2; half++ {
					dl := dAll * float32(int32(scales[is])-32)
					is++
					for l := 0; l < 16; l++ {
						v := int32((q[l+16*half] >> shift) & 3)
						if hm[l+16*half]&m == 0 {
							v -= 4
						}
						y[o] = dl * float32(v)
						o++
					}
				}
				shift += 2
				m <<= 1
			}
			q = q[32:]
		}
	}
}

// Q4_K: d, dmin, scales[12] (8 6-bit scales and mins), qs[128].
func quantizeQ4_K(dst []byte, x []float32) { quantizeQ45K(dst, x, false) }

// Q5_K: d, dmin, scales[12], qh[32], qs[128].
func quantizeQ5_K(dst []byte, x []float32) { quantizeQ45K(dst, x, true) }

// quantizeQ45K is quantize_row_q4_K_ref (five == false) and quantize_row_q5_K_ref: they
// differ in nmax, the search range of make_qkx2_quants and the packing of the quants.
func quantizeQ45K(dst []byte, x []float32, five bool) {
	var L [qkK]uint8
	var Laux [32]uint8
	var weights [32]float32
	var mins, scales [qkK / 32]float32
	nmax, rmin, nstep, bsize := 15, float32(-1), 20, 144
	if five {
		nmax, rmin, nstep, bsize = 31, -0.5, 15, 176
	}
	for i := 0; i < len(x)/qkK; i++ {
		xb, y := x[i*qkK:(i+1)*qkK], dst[i*bsize:(i+1)*bsize]
		ysc := y[4:16]
		var maxScale, maxMin float32
		for j := 0; j < qkK/32; j++ {
			var sumX2 float32
			for l := 0; l < 32; l++ {
				sumX2 += float32(xb[32*j+l] * xb[32*j+l])
			}
			avX := sqrt32(sumX2 / 32)
			for l := 0; l < 32; l++ {
				weights[l] = avX + abs32(xb[32*j+l])
			}
			scales[j] = makeQKX2Quants(32, nmax, xb[32*j:], weights[:], L[32*j:], Laux[:], &mins[j], rmin, 0.1, nstep, false)
			if scales[j] > maxScale {
				maxScale = scales[j]
			}
			if mins[j] > maxMin {
				maxMin = mins[j]
			}
		}
		var invScale, invMin float32
		if maxScale > 0 {
			invScale = 63 / maxScale
		}
		if maxMin > 0 {
			invMin = 63 / maxMin
		}
		for j := 0; j < qkK/32; j++ {
			ls := min(63, uint8(nearestInt(float32(invScale*scales[j]))))
			lm := min(63, uint8(nearestInt(float32(invMin*mins[j]))))
			if j < 4 {
				ysc[j] = ls
				ysc[j+4] = lm
			} else {
				ysc[j+4] = ls&0xf | (lm&0xf)<<4
				ysc[j-4] |= (ls >> 4) << 6
				ysc[j] |= (lm >> 4) << 6
			}
		}
		putFP16(y[0:], maxScale/63)
		putFP16(y[2:], maxMin/63)
		for j := 0; j < qkK/32; j++ {
			sc, m := getScaleMinK4(j, ysc)
			d := fp16(y[0:]) * float32(sc)
			if d == 0 {
				continue
			}
			dm := fp16(y[2:]) * float32(m)
			for ii := 0; ii < 32; ii++ {
				l := nearestInt(float32(xb[32*j+ii]+dm) / d)
				L[32*j+ii] = uint8(clamp32(l, 0, int32(nmax)))
			}
		}
		if !five {
			q := y[16:144]
			for j := 0; j < qkK; j += 64 {
				for l := 0; l < 32; l++ {
					q[l] = L[j+l] | L[j+l+32]<<4
				}
				q = q[32:]
			}
			continue
		}
		qh, ql := y[16:48], y[48:176]
		for j := range qh {
			qh[j] = 0
		}
		m1, m2 := uint8(1), uint8(2)
		for n := 0; n < qkK; n += 64 {
			for j := 0; j < 32; j++ {
				l1 := L[n+j]
				if l1 > 15 {
					l1 -= 16
					qh[j] |= m1
				}
				l2 := L[n+j+32]
				if l2 > 15 {
					l2 -= 16
					qh[j] |= m2
				}
				ql[j] = l1 | l2<<4
			}
			m1 <<= 2
			m2 <<= 2
			ql = ql[32:]
		}
	}
}

func dequantizeQ4_K(dst []float32, src []byte) {
	for i := 0; i < len(dst)/qkK; i++ {
		b, y := src[i*144:(i+1)*144], dst[i*qkK:(i+1)*qkK]
		d, dmin := fp16(b), fp16(b[2:])
		sc, q := b[4:16], b[16:144]
		is, o := 0, 0
		for j := 0; j < qkK; j += 64 {
			s, m := getScaleMinK4(is, sc)
			d1, m1 := d*float32(s), dmin*float32(m)
			s, m = getScaleMinK4(is+1, sc)
			d2, m2 := d*float32(s), dmin*float32(m)
			for l := 0; l < 32; l++ {
				y[o+l] = float32(d1*float32(q[l]&0xf)) - m1
				y[o+32+l] = float32(d2*float32(q[l]>>4)) - m2
			}
			q, is, o = q[32:], is+2, o+64
		}
	}
}

func dequantizeQ5_K(dst []float32, src []byte) {
	for i := 0; i < len(dst)/qkK; i++ {
		b, y := src[i*176:(i+1)*176], dst[i*qkK:(i+1)*qkK]
		d, dmin := fp16(b), fp16(b[2:])
		sc, qh, ql := b[4:16], b[16:48], b[48:176]
		is, o := 0, 0
		u1, u2 := uint8(1), uint8(2)
		for j := 0; j < qkK; j += 64 {
			s, m := getScaleMinK4(is, sc)
			d1, m1 := d*float32(s), dmin*float32(m)
			s, m = getScaleMinK4(is+1, sc)
			d2, m2 := d*float32(s), dmin*float32(m)
			for l := 0; l < 32; l++ {
				lo, hi := int32(ql[l]&0xf), int32(ql[l]>>4)
				if qh[l]&u1 != 0 {
					lo += 16
				}
				if qh[l]&u2 != 0 {
					hi += 16
				}
				y[o+l] = float32(d1*float32(lo)) - m1
				y[o+32+l] = float32(d2*float32(hi)) - m2
			}
			ql, is, o = ql[32:], is+2, o+64
			u1 <<= 2
			u2 <<= 2
		}
	}
}

// Q6_K: ql[128] (low 4 bits), qh[64] (high 2 bits), scales[16] (int8), d.
func quantizeQ6_K(dst []byte, x []float32) {
	var L [qkK]int8
	var scales [qkK / 16]float32
	for i := 0; i < len(x)/qkK; i++ {
		xb, y := x[i*qkK:(i+1)*qkK], dst[i*210:(i+1)*210]
		var maxScale, maxAbsScale float32
		for ib := 0; ib < qkK/16; ib++ {
			scale := makeQXQuants(16, 32, xb[16*ib:], L[16*ib:], 1)
			scales[ib] = scale
			if a := abs32(scale); a > maxAbsScale {
				maxAbsScale, maxScale = a, scale
			}
		}
		if maxAbsScale < groupMaxEps {
			for j := range y {
				y[j] = 0
			}
			putFP16(y[208:], 0)
			continue
		}
		iscale := -128 / maxScale
		putFP16(y[208:], 1/iscale)
		ysc := y[192:208]
		for ib := 0; ib < qkK/16; ib++ {
			ysc[ib] = byte(int8(min(127, nearestInt(float32(iscale*scales[ib])))))
		}
		for j := 0; j < qkK/16; j++ {
			d := fp16(y[208:]) * float32(int8(ysc[j]))
			if d == 0 {
				continue
			}
			for ii := 0; ii < 16; ii++ {
				l := clamp32(nearestInt(xb[16*j+ii]/d), -32, 31)
				L[16*j+ii] = int8(l + 32)
			}
		}
		ql, qh := y[0:128], y[128:192]
		for j := 0; j < qkK; j += 128 {
			for l := 0; l < 32; l++ {
				q1 := uint8(L[j+l]) & 0xf
				q2 := uint8(L[j+l+32]) & 0xf
				q3 := uint8(L[j+l+64]) & 0xf
				q4 := uint8(L[j+l+96]) & 0xf
				ql[l] = q1 | q3<<4
				ql[l+32] = q2 | q4<<4
				qh[l] = uint8(L[j+l])>>4 | (uint8(L[j+l+32])>>4)<<2 | (uint8(L[j+l+64])>>4)<<4 | (uint8(L[j+l+96])>>4)<<6
			}
			ql, qh = ql[64:], qh[32:]
		}
	}
}

func dequantizeQ6_K(dst []float32, src []byte) {
	for i := 0; i < len(dst)/qkK; i++ {
		b, y := src[i*210:(i+1)*210], dst[i*qkK:(i+1)*qkK]
		d := fp16(b[208:])
		ql, qh, sc := b[0:128], b[128:192], b[192:208]
		for n := 0; n < qkK; n += 128 {
			for l := 0; l < 32; l++ {
				is := l / 16
				q1 := int8(ql[l]&0xf|((qh[l]>>0)&3)<<4) - 32
				q2 := int8(ql[l+32]&0xf|((qh[l]>>2)&3)<<4) - 32
				q3 := int8(ql[l]>>4|((qh[l]>>4)&3)<<4) - 32
				q4 := int8(ql[l+32]>>4|((qh[l]>>6)&3)<<4) - 32
				y[n+l] = float32(d*float32(int8(sc[is]))) * float32(q1)
				y[n+l+32] = float32(d*float32(int8(sc[is+2]))) * float32(q2)
				y[n+l+64] = float32(d*float32(int8(sc[is+4]))) * float32(q3)
				y[n+l+96] = float32(d*float32(int8(sc[is+6]))) * float32(q4)
			}
			ql, qh, sc = ql[64:], qh[32:], sc[8:]
		}
	}
}
