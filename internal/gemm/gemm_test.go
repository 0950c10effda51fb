package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func naiveNT(m, n, k int, a, b []float32) []float64 {
	out := make([]float64, m*n)
	for i := range m {
		for j := range n {
			var s float64
			for p := range k {
				s += float64(a[i*k+p]) * float64(b[j*k+p])
			}
			out[i*n+j] = s
		}
	}
	return out
}

func randSlice(r *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(r.NormFloat64())
	}
	return s
}

func TestMulNTMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, sh := range [][3]int{
		{1, 1, 1}, {4, 16, 8}, {3, 5, 7}, {5, 17, 1}, {17, 33, 36}, {112, 32, 288},
		{64, 4, 288}, {14, 128, 64}, {130, 70, 9}, {896, 64, 576}, {7, 1, 0},
	} {
		m, n, k := sh[0], sh[1], sh[2]
		t.Run(fmt.Sprintf("%dx%dx%d", m, n, k), func(t *testing.T) {
			a, b := randSlice(r, m*k), randSlice(r, n*k)
			c := make([]float32, m*n)
			for i := range c {
				c[i] = float32(math.NaN()) // MulNT must overwrite, not accumulate
			}
			MulNT(m, n, k, a, b, c)
			want := naiveNT(m, n, k, a, b)
			for i := range c {
				// float32 sums of k products of unit normals: error grows like sqrt(k)·ε.
				tol := 1e-5 * (1 + math.Sqrt(float64(k))) * (1 + math.Abs(want[i]))
				if d := math.Abs(float64(c[i]) - want[i]); !(d <= tol) {
					t.Fatalf("c[%d] = %g, want %g (|diff| %g > %g)", i, c[i], want[i], d, tol)
				}
			}
		})
	}
}

// TestMulNTRowsIndependent checks the contract that a row's result does not depend on the
// rows computed with it: every row of a product equals the product of that row alone,
// bit for bit, serial or parallel.
func TestMulNTRowsIndependent(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	m, n, k := 203, 37, 300 // above parallelWork, ragged tiles
	a, b := randSlice(r, m*k), randSlice(r, n*k)
	full := make([]float32, m*n)
	MulNT(m, n, k, a, b, full)
	one := make([]float32, n)
	for i := range m {
		MulNT(1, n, k, a[i*k:(i+1)*k], b, one)
		for j := range n {
			if math.Float32bits(one[j]) != math.Float32bits(full[i*n+j]) {
				t.Fatalf("row %d col %d: alone %g, in the product %g", i, j, one[j], full[i*n+j])
			}
		}
	}
}

// isas returns every kernel this CPU runs.
func isas() []isa {
	out := []isa{goISA}
	for _, k := range []isa{cur, bestISA()} {
		if k.name != "go" && !slices.ContainsFunc(out, func(o isa) bool { return o.name == k.name }) {
			out = append(out, k)
		}
	}
	if cur.name == "avx512" {
		out = append(out, avx2KernelForTests()...)
	}
	return out
}

// withISA runs fn with k as the kernel in use.
func withISA(t *testing.T, k isa, fn func()) {
	t.Helper()
	old := cur
	cur = k
	defer func() { cur = old }()
	fn()
}

// TestKernelsAgree checks every kernel the CPU runs against a float64 product, and that
// the assembly kernels (all fused multiply-add, summing in the same order) give the same
// bits whatever their tile size.
func TestKernelsAgree(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, sh := range [][3]int{{1, 1, 1}, {9, 40, 9}, {33, 65, 64}, {8, 32, 1152}, {70, 3, 300}} {
		m, n, k := sh[0], sh[1], sh[2]
		a, b := randSlice(r, m*k), randSlice(r, n*k)
		want := naiveNT(m, n, k, a, b)
		var fma []float32
		for _, kern := range isas() {
			c := make([]float32, m*n)
			withISA(t, kern, func() { MulNT(m, n, k, a, b, c) })
			for i := range c {
				tol := 1e-5 * (1 + math.Sqrt(float64(k))) * (1 + math.Abs(want[i]))
				if d := math.Abs(float64(c[i]) - want[i]); !(d <= tol) {
					t.Fatalf("%s %v: c[%d] = %g, want %g", kern.name, sh, i, c[i], want[i])
				}
			}
			if kern.name == "go" {
				continue
			}
			if fma == nil {
				fma = c
				continue
			}
			for i := range c {
				if math.Float32bits(c[i]) != math.Float32bits(fma[i]) {
					t.Fatalf("%s %v: c[%d] = %g, another assembly kernel gave %g", kern.name, sh, i, c[i], fma[i])
				}
			}
		}
	}
}

// TestPackedForms checks MulPacked and MulPanel on strided operands, B packed from rows
// (PackRows) and from columns (PackCols), against MulNT.
func TestPackedForms(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	const m, n, k, lda, ldb, ldc = 13, 37, 21, 30, 50, 45
	a := randSlice(r, m*lda)
	bRows := randSlice(r, n*ldb) // B as n rows of k
	bCols := make([]float32, k*ldb)
	for j := range n {
		for p := range k {
			bCols[p*ldb+j] = bRows[j*ldb+p]
		}
	}
	dense := func(src []float32, rows, cols, ld int) []float32 {
		out := make([]float32, rows*cols)
		for i := range rows {
			copy(out[i*cols:(i+1)*cols], src[i*ld:i*ld+cols])
		}
		return out
	}
	want := make([]float32, m*n)
	MulNT(m, n, k, dense(a, m, k, lda), dense(bRows, n, k, ldb), want)
	for _, kern := range isas() {
		withISA(t, kern, func() {
			for name, pack := range map[string]func([]float32){
				"rows": func(dst []float32) { PackRows(dst, n, k, bRows, ldb) },
				"cols": func(dst []float32) { PackCols(dst, n, k, bCols, ldb) },
			} {
				packed := make([]float32, PackedLen(n, k))
				pack(packed)
				c := make([]float32, m*ldc)
				MulPacked(m, n, k, a, lda, packed, c, ldc)
				byPanel := make([]float32, m*ldc)
				w := PanelWidth()
				for q := 0; q*w < n; q++ {
					MulPanel(m, k, a, lda, packed[q*w*k:], min(w, n-q*w), byPanel[q*w:], ldc)
				}
				for i := range m {
					for j := range n {
						ref := want[i*n+j]
						if kern.name != "go" && (c[i*ldc+j] != ref || byPanel[i*ldc+j] != ref) {
							t.Fatalf("%s %s (%d,%d): MulPacked %g, MulPanel %g, MulNT %g", kern.name, name, i, j, c[i*ldc+j], byPanel[i*ldc+j], ref)
						}
						if d := math.Abs(float64(c[i*ldc+j] - ref)); d > 1e-4 {
							t.Fatalf("%s %s (%d,%d): %g, want %g", kern.name, name, i, j, c[i*ldc+j], ref)
						}
					}
				}
			}
		})
	}
}

func TestMulNTPanicsOnShortSlices(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("MulNT with a short slice did not panic")
		}
	}()
	MulNT(2, 2, 2, make([]float32, 3), make([]float32, 4), make([]float32, 4))
}

func BenchmarkMulNT(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, sh := range [][3]int{{896, 32, 288}, {448, 64, 576}, {3584, 128, 1152}, {14, 320, 128}} {
		m, n, k := sh[0], sh[1], sh[2]
		b.Run(fmt.Sprintf("%dx%dx%d", m, n, k), func(b *testing.B) {
			x, w, c := randSlice(r, m*k), randSlice(r, n*k), make([]float32, m*n)
			for b.Loop() {
				MulNT(m, n, k, x, w, c)
			}
			b.ReportMetric(float64(2*m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// TestMulRowPtrs checks the pointer-table form against MulPanel on the same values.
func TestMulRowPtrs(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, kern := range isas() {
		withISA(t, kern, func() {
			w := PanelWidth()
			for _, sh := range [][2]int{{1, 1}, {13, 21}, {32, 288}, {9, 5}} {
				m, k := sh[0], sh[1]
				a := randSlice(r, m*k)
				src := randSlice(r, k*w+50)
				rows := make([]*float32, k)
				panel := make([]float32, k*w)
				for p := range k {
					off := (p * 37) % 50
					rows[p] = &src[p*w+off]
					copy(panel[p*w:(p+1)*w], src[p*w+off:p*w+off+w])
				}
				got, want := make([]float32, m*w), make([]float32, m*w)
				MulRowPtrs(m, k, a, k, rows, got, w)
				MulPanel(m, k, a, k, panel, w, want, w)
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s %v: element %d = %g, MulPanel %g", kern.name, sh, i, got[i], want[i])
					}
				}
			}
		})
	}
}

// TestKBlocksKeepBits checks that cutting the contraction into k-blocks gives the bits of
// the uncut product (the kernels continue each sum across blocks).
func TestKBlocksKeepBits(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	const m, n, k = 37, 40, 700
	a, b := randSlice(r, m*k), randSlice(r, n*k)
	run := func(block int) []float32 {
		old := kc
		kc = block
		defer func() { kc = old }()
		c := make([]float32, m*n)
		MulNT(m, n, k, a, b, c)
		rows := make([]*float32, k)
		w := PanelWidth()
		panel := make([]float32, k*w)
		PackRows(panel, min(n, w), k, b, k)
		for p := range k {
			rows[p] = &panel[p*w]
		}
		ptr := make([]float32, m*w)
		MulRowPtrs(m, k, a, k, rows, ptr, w)
		return append(c, ptr...)
	}
	for _, kern := range isas() {
		withISA(t, kern, func() {
			whole, cut := run(k), run(64)
			for i := range whole {
				if math.Float32bits(whole[i]) != math.Float32bits(cut[i]) {
					t.Fatalf("%s: element %d: %g uncut, %g in blocks of 64", kern.name, i, whole[i], cut[i])
				}
			}
		})
	}
}

// TestMulPackedARowPtrGroup checks the grouped form against one panel at a time.
func TestMulPackedARowPtrGroup(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	for _, kern := range isas() {
		withISA(t, kern, func() {
			w := PanelWidth()
			const m, k, groups = 19, 600, 3
			a := randSlice(r, m*k)
			ap := make([]float32, PackedALen(m, k))
			PackA(ap, m, k, a, k)
			src := randSlice(r, k*w*groups+64)
			rows := make([][]*float32, groups)
			for g := range rows {
				rows[g] = make([]*float32, k)
				for p := range k {
					rows[g][p] = &src[(p*groups+g)*w+(p*7+g)%64]
				}
			}
			ld := groups*w + 5
			got := make([]float32, m*ld)
			offs := make([]int, groups)
			for g := range offs {
				offs[g] = g * w
			}
			MulPackedARowPtrGroup(m, k, ap, rows, got, offs, ld)
			for g := range rows {
				want := make([]float32, m*w)
				MulRowPtrs(m, k, a, k, rows[g], want, w)
				for i := range m {
					for j := range w {
						if math.Float32bits(got[i*ld+g*w+j]) != math.Float32bits(want[i*w+j]) {
							t.Fatalf("%s panel %d (%d, %d): %g, alone %g", kern.name, g, i, j, got[i*ld+g*w+j], want[i*w+j])
						}
					}
				}
			}
		})
	}
}

// TestPackA checks PackA (the vector transpose where the CPU has it) against its definition.
func TestPackA(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	for _, kern := range isas() {
		withISA(t, kern, func() {
			for _, sh := range [][3]int{{8, 8, 8}, {19, 37, 40}, {3, 5, 9}, {16, 300, 301}} {
				m, k, lda := sh[0], sh[1], sh[2]
				a := randSlice(r, m*lda)
				got := make([]float32, PackedALen(m, k))
				for i := range got {
					got[i] = float32(math.NaN())
				}
				PackA(got, m, k, a, lda)
				mr := kern.mr
				for i := range got {
					tile, rest := i/(mr*k), i%(mr*k)
					p, row := rest/mr, tile*mr+rest%mr
					want := float32(0)
					if row < m {
						want = a[row*lda+p]
					}
					if got[i] != want {
						t.Fatalf("%s %v: packed[%d] = %g, want %g", kern.name, sh, i, got[i], want)
					}
				}
			}
		})
	}
}
