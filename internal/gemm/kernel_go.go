package gemm

import "unsafe"

// kernel4x16Go is the portable kernel: c[r*ldc+j] = Σ_{p<k} a[p*4+r]·b[p*16+j] for r < 4,
// j < 16, summing over p in increasing order (multiply, then add); with cont the sums
// continue from c's values.
func kernel4x16Go(k int, a, b, c []float32, ldc int, cont bool) {
	for r := 0; r < 4; r++ {
		var acc [16]float32
		if cont {
			copy(acc[:], c[r*ldc:r*ldc+16])
		}
		for p := range k {
			av := a[p*4+r]
			panel := b[p*16 : p*16+16]
			for j := range acc {
				acc[j] += av * panel[j]
			}
		}
		copy(c[r*ldc:r*ldc+16], acc[:])
	}
}

// kernel4x16GoPtr is kernel4x16Go with row p of the panel at rows[p].
func kernel4x16GoPtr(k int, a []float32, rows []*float32, c []float32, ldc int, cont bool) {
	for r := 0; r < 4; r++ {
		var acc [16]float32
		if cont {
			copy(acc[:], c[r*ldc:r*ldc+16])
		}
		for p := range k {
			av := a[p*4+r]
			panel := unsafe.Slice(rows[p], 16)
			for j := range acc {
				acc[j] += av * panel[j]
			}
		}
		copy(c[r*ldc:r*ldc+16], acc[:])
	}
}
