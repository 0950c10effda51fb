package qgemm

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vdpp/vdpp/internal/gemm"
	"github.com/vdpp/vdpp/tensor/quant"
)

// randomBlocks returns n rows of k weights of type t in ggml's layout with random quants
// and scales of weight-like size (|w| up to about 0.1).
func randomBlocks(r *rand.Rand, t Type, n, k int) []byte {
	l := layouts[t]
	out := make([]byte, n*k/l.blockK*l.blockBytes)
	for i := range out {
		out[i] = byte(r.Uint32())
	}
	for b := 0; b < len(out); b += l.blockBytes {
		blk := out[b : b+l.blockBytes]
		switch t {
		case Q8_0:
			putHalf(blk, float32(0.001*(0.2+r.Float64())))
		case Q4_K:
			putHalf(blk, float32(0.0005*(0.2+r.Float64())))
			putHalf(blk[2:], float32(0.002*(0.1+r.Float64())))
		}
	}
	return out
}

// putHalf stores v as binary16.
func putHalf(b []byte, v float32) { binary.LittleEndian.PutUint16(b, quant.Float32ToHalf(v)) }

// dequantize is ggml's dequantization (tensor/quant, checked against ggml's own code): the
// reference the kernels are compared with.
func dequantize(t Type, n, k int, src []byte) []float32 {
	out := make([]float32, n*k)
	if err := quant.Dequantize(t, src, out); err != nil {
		panic(err)
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

// isas returns every kernel set this CPU runs.
func isas() []isa {
	if cur.name == "go" {
		return []isa{goISA}
	}
	return []isa{goISA, cur}
}

func withISA(k isa, fn func()) {
	old := cur
	cur = k
	defer func() { cur = old }()
	fn()
}

var types = []Type{Q8_0, Q4_K}

func TestPackRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, typ := range types {
		for _, n := range []int{1, 32, 45, 70} {
			k := 2 * layouts[typ].blockK
			src := randomBlocks(r, typ, n, k)
			w, err := Pack(typ, n, k, src)
			if err != nil {
				t.Fatal(err)
			}
			back := make([]byte, len(src))
			if err := w.Unpack(back); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(back, src) {
				t.Fatalf("%v [%d, %d]: Unpack(Pack(src)) differs from src", typ, n, k)
			}
			if _, err := FromPacked(typ, n, k, w.Data[1:]); err == nil {
				t.Fatalf("%v: FromPacked took a short buffer", typ)
			}
		}
	}
}

func TestPackRefusesBadShapes(t *testing.T) {
	for _, tc := range []struct {
		t    Type
		n, k int
	}{{Q8_0, 4, 48}, {Q4_K, 4, 128}, {Q8_0, 0, 32}, {Type(99), 4, 32}} {
		if _, err := Pack(tc.t, tc.n, tc.k, nil); err == nil {
			t.Errorf("Pack(%v, %d, %d) accepted", tc.t, tc.n, tc.k)
		}
	}
}

// reference returns the product of a with the dequantized weights in float64, the
// activations quantized as the kernels quantize them for type t (so that the only
// difference left is the float32 rounding of the block sums), and the plain float64 product.
func reference(t Type, m, k int, a []float32, n int, wf []float32) (quantized, plain []float64) {
	wide := t == Q8_0
	bb := blockBytes(wide)
	quantized, plain = make([]float64, m*n), make([]float64, m*n)
	tile := make([]byte, k/32*bb)
	for i := range m {
		quantizeTile(tile, 1, k, a[i*k:], k, wide)
		for j := range n {
			var sq, sp float64
			for b := range k / 32 {
				blk := tile[b*bb:]
				var s float64
				for p := range 32 {
					q := float64(int8(blk[(p/4)*mr*4+p%4]))
					if wide {
						q = 254*q + float64(int8(blk[wLo+(p/4)*mr*4+p%4]))
					}
					s += q * float64(wf[j*k+b*32+p])
					sp += float64(a[i*k+b*32+p]) * float64(wf[j*k+b*32+p])
				}
				scale := nScale
				if wide {
					scale = wScale
				}
				sq += float64(f32at(blk[scale:])) * s
			}
			quantized[i*n+j], plain[i*n+j] = sq, sp
		}
	}
	return quantized, plain
}

// TestMulMatchesDequantized checks every kernel against the float64 product of the
// quantized activations and the dequantized weights (what the kernels compute up to
// float32 rounding), and against the unquantized product (the activation quantization's
// error, below 1% relative L2).
func TestMulMatchesDequantized(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, typ := range types {
		for _, sh := range [][3]int{{1, 1, 256}, {6, 32, 256}, {13, 45, 512}, {40, 70, 768}} {
			m, n, k := sh[0], sh[1], sh[2]
			a := randSlice(r, m*k)
			src := randomBlocks(r, typ, n, k)
			w, err := Pack(typ, n, k, src)
			if err != nil {
				t.Fatal(err)
			}
			want, plain := reference(typ, m, k, a, n, dequantize(typ, n, k, src))
			for _, kern := range isas() {
				t.Run(fmt.Sprintf("%v/%s/%dx%dx%d", typ, kern.name, m, n, k), func(t *testing.T) {
					c := make([]float32, m*n)
					for i := range c {
						c[i] = float32(math.NaN())
					}
					withISA(kern, func() { Mul(m, a, k, w, c, n) })
					var num, den float64
					for i := range c {
						scale := math.Sqrt(float64(k)) * 0.05
						if d := math.Abs(float64(c[i]) - want[i]); !(d <= 2e-5*scale) {
							t.Fatalf("c[%d] = %g, quantized reference %g", i, c[i], want[i])
						}
						num += (float64(c[i]) - plain[i]) * (float64(c[i]) - plain[i])
						den += plain[i] * plain[i]
					}
					// Q8_0's activations have 16 bits, Q4_K's 8.
					bound := 1e-2
					if typ == Q8_0 {
						bound = 1e-4
					}
					if rel := math.Sqrt(num / den); m*n >= 64 && rel > bound {
						t.Fatalf("relative L2 error against the float product %.3g > %g", rel, bound)
					}
				})
			}
		}
	}
}

// TestRowsIndependent checks the contract: a row's result is the same bits alone, in a
// serial product and in a parallel one, with any row stride.
func TestRowsIndependent(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, typ := range types {
		const m, n, k, lda, ldc = 110, 70, 512, 530, 75 // 19 tiles: split in two by Mul
		a := randSlice(r, m*lda)
		w, err := Pack(typ, n, k, randomBlocks(r, typ, n, k))
		if err != nil {
			t.Fatal(err)
		}
		for _, kern := range isas() {
			withISA(kern, func() {
				full, serial := make([]float32, m*ldc), make([]float32, m*ldc)
				Mul(m, a, lda, w, full, ldc)
				MulSerial(m, a, lda, w, serial, ldc)
				one := make([]float32, n)
				for i := range m {
					if i%7 != 0 && i < m-3 {
						continue // a sample of the rows, the edge tile's included
					}
					MulSerial(1, a[i*lda:i*lda+k], k, w, one, n)
					for j := range n {
						f, s, o := math.Float32bits(full[i*ldc+j]), math.Float32bits(serial[i*ldc+j]), math.Float32bits(one[j])
						if f != o || s != o {
							t.Fatalf("%v %s row %d col %d: alone %g, parallel %g, serial %g", typ, kern.name, i, j, one[j], full[i*ldc+j], serial[i*ldc+j])
						}
					}
				}
			})
		}
	}
}

func TestMulPanicsOnShortSlices(t *testing.T) {
	w, err := Pack(Q8_0, 2, 32, make([]byte, 68))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Mul with a short slice did not panic")
		}
	}()
	Mul(2, make([]float32, 63), 32, w, make([]float32, 4), 2)
}

// BenchmarkMul times the quantized products beside the float32 product of the same shape
// (internal/gemm on packed float32 weights): shapes of a Wan 2.1 1.3B block (dim 1536,
// ffn 8960) at 256 rows.
func BenchmarkMul(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, sh := range [][3]int{{256, 1536, 1536}, {256, 8960, 1536}, {256, 1536, 8960}} {
		m, n, k := sh[0], sh[1], sh[2]
		a, c := randSlice(r, m*k), make([]float32, m*n)
		flops := func(b *testing.B) {
			b.ReportMetric(float64(2*m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		}
		b.Run(fmt.Sprintf("f32/%dx%dx%d", m, n, k), func(b *testing.B) {
			packed := make([]float32, gemm.PackedLen(n, k))
			gemm.PackRows(packed, n, k, randSlice(r, n*k), k)
			for b.Loop() {
				gemm.MulPacked(m, n, k, a, k, packed, c, n)
			}
			flops(b)
		})
		for _, typ := range types {
			w, err := Pack(typ, n, k, randomBlocks(r, typ, n, k))
			if err != nil {
				b.Fatal(err)
			}
			b.Run(fmt.Sprintf("%v/%dx%dx%d", typ, m, n, k), func(b *testing.B) {
				for b.Loop() {
					Mul(m, a, k, w, c, n)
				}
				flops(b)
			})
		}
	}
}

// TestQuantizeKernelsAgree checks that every kernel set quantizes activations to the same
// bytes (the portable quantizer is the definition), zero and tied values included.
func TestQuantizeKernelsAgree(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	const k, lda = 256, 260
	a := randSlice(r, mr*lda)
	clear(a[32:64])                 // a zero block
	for i := lda; i < lda+32; i++ { // a block whose values quantize to ties: amax 127, x = n + 0.5
		a[i] = float32(i%7) + 0.5
	}
	a[lda] = 127
	for _, wide := range []bool{true, false} {
		for rows := 1; rows <= mr; rows += mr - 1 {
			want := make([]byte, k/32*blockBytes(wide))
			quantizeTile(want, rows, k, a, lda, wide)
			for _, kern := range isas() {
				got := make([]byte, len(want))
				for i := range got {
					got[i] = 0xAA
				}
				kern.quantize(got, rows, k, a, lda, wide)
				if !bytes.Equal(got, want) {
					t.Fatalf("%s (rows %d, wide %v): quantized tile differs from the portable quantizer's", kern.name, rows, wide)
				}
			}
		}
	}
}

// TestDequantizeRows checks the packed weights' widening against ggml's dequantization of
// the blocks they were packed from (random blocks, and blocks ggml's quantizer made of
// normal weights), bit for bit.
func TestDequantizeRows(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for i, typ := range append(types, types...) {
		const n = 45
		k := 2 * layouts[typ].blockK
		src := randomBlocks(r, typ, n, k)
		if i >= len(types) {
			var err error
			if src, err = quant.Quantize(typ, randSlice(r, n*k)); err != nil {
				t.Fatal(err)
			}
		}
		w, err := Pack(typ, n, k, src)
		if err != nil {
			t.Fatal(err)
		}
		want := dequantize(typ, n, k, src)
		got := make([]float32, (n-3)*k)
		w.DequantizeRows(3, n, got)
		for i, v := range got {
			if math.Float32bits(v) != math.Float32bits(want[3*k+i]) {
				t.Fatalf("%v: value %d of rows 3..%d: %g, ggml %g", typ, i, n, v, want[3*k+i])
			}
		}
	}
}

// TestKChunksKeepBits checks that cutting the contraction into passes gives the bits of
// one pass (the kernels continue each sum from C), with ragged rows and columns.
func TestKChunksKeepBits(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, typ := range types {
		const m, n, k = 13, 45, 2048
		a := randSlice(r, m*k)
		w, err := Pack(typ, n, k, randomBlocks(r, typ, n, k))
		if err != nil {
			t.Fatal(err)
		}
		for _, kern := range isas() {
			withISA(kern, func() {
				run := func(blocks int) []float32 {
					old := kcBlocks
					kcBlocks = blocks
					defer func() { kcBlocks = old }()
					c := make([]float32, m*n)
					MulSerial(m, a, k, w, c, n)
					return c
				}
				whole, cut := run(k/32), run(16)
				for i := range whole {
					if math.Float32bits(whole[i]) != math.Float32bits(cut[i]) {
						t.Fatalf("%v %s: element %d: %g in one pass, %g in passes of 16 blocks", typ, kern.name, i, whole[i], cut[i])
					}
				}
			})
		}
	}
}
