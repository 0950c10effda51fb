package nn

import (
	"fmt"
	"math/rand/v2"
	"testing"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import
)

// BenchmarkConv2D compares the conv lowerings on the test backend for 3x3 convolutions of
// UNet-like sizes. Run: go test ./model/nn -run '^$' -bench Conv2D -benchtime 3x
func BenchmarkConv2D(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	sizes := []struct{ n, c, hw int }{{6, 64, 32}, {6, 320, 16}}
	for _, sz := range sizes {
		x, w, bias := randDense(r, sz.n, sz.c, sz.hw, sz.hw), randDense(r, sz.c, sz.c, 3, 3), randDense(r, sz.c)
		flops := 2.0 * float64(sz.n*sz.c*sz.c*9*sz.hw*sz.hw)
		for _, form := range []ConvForm{ConvIm2Col, ConvNative, ConvFused} {
			b.Run(fmt.Sprintf("N%d-C%d-HW%d/%v", sz.n, sz.c, sz.hw, form), func(b *testing.B) {
				p, err := NewProgram(testBackend(b), nil, "bench", func(_ Scope, in []*Node) []*Node {
					return []*Node{Conv2D(in[0], in[1], in[2], ConvOpts{Padding: 1, Form: form})}
				})
				if err != nil {
					b.Fatal(err)
				}
				defer p.Close()
				if _, err := p.Run(x, w, bias); err != nil { // compile outside the timer
					b.Fatal(err)
				}
				b.ResetTimer()
				for b.Loop() {
					if _, err := p.Run(x, w, bias); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkMatMulNT times the products of Linear and the im2col convolutions through the
// backend; run it with VDPP_KERNELS=off (the default of --backend go's kernels=) to compare
// with simplego's own kernels.
func BenchmarkMatMulNT(b *testing.B) {
	r := rand.New(rand.NewPCG(2, 2))
	for _, sz := range []struct{ m, k, n int }{{896, 288, 32}, {448, 576, 64}, {3584, 1152, 128}} {
		x, w := randDense(r, sz.m, sz.k), randDense(r, sz.n, sz.k)
		b.Run(fmt.Sprintf("M%d-K%d-N%d", sz.m, sz.k, sz.n), func(b *testing.B) {
			p, err := NewProgram(testBackend(b), nil, "bench", func(_ Scope, in []*Node) []*Node {
				return []*Node{MatMulNT(in[0], in[1])}
			})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			if _, err := p.Run(x, w); err != nil { // compile outside the timer
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := p.Run(x, w); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(2*float64(sz.m*sz.k*sz.n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
