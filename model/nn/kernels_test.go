package nn

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/backends"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import

	"github.com/vdpp/vdpp/internal/gemm"
	"github.com/vdpp/vdpp/internal/sghook"
	"github.com/vdpp/vdpp/tensor"
)

// goBackend returns a simplego backend with kernels k for the test.
func goBackend(t testing.TB, k Kernels) backends.Backend {
	t.Helper()
	b, err := NewGoBackend(k)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Finalize)
	return b
}

// TestCPUKernelsInstalled fails when vdpp could not install its CPU kernels into simplego
// (the sign that a GoMLX upgrade changed what internal/sghook relies on), and checks that
// each backend runs the kernels its spec selects.
func TestCPUKernelsInstalled(t *testing.T) {
	if err := sghook.Install(); err != nil {
		t.Fatal(err)
	}
	acc := gemm.Accelerated()
	for _, tc := range []struct {
		spec string
		want Kernels
	}{
		{"go:kernels=on", Kernels{GEMM: acc, Ops: true, Fused: true}},
		{"go:kernels=gemm", Kernels{GEMM: acc}},
		{"go:kernels=ops+fused", Kernels{Ops: true, Fused: true}},
		{"go:kernels=off", Kernels{}},
	} {
		b, err := NewBackend(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		if got := KernelsOf(b); got != tc.want || UsesKernels(b) != tc.want.Fused {
			t.Errorf("%s: KernelsOf = %+v, UsesKernels = %v; want %+v", tc.spec, got, UsesKernels(b), tc.want)
		}
		b.Finalize()
	}
}

// TestKernelsPerBackend: two backends of one process run what each selects: the same
// program runs the fused row norm on one and the plain graph on the other, to within
// float32 rounding of each other.
func TestKernelsPerBackend(t *testing.T) {
	fused, plain := goBackend(t, AllKernels), goBackend(t, Kernels{GEMM: true, Ops: true})
	x := randDense(rand.New(rand.NewPCG(1, 2)), 3, 5, 16)
	norm := func(in []*Node) *Node { return LayerNorm(in[0], nil, nil, 1e-5) }
	a, b := runOpOn(t, fused, norm, x), runOpOn(t, plain, norm, x)
	checkClose(t, "layer norm", a, b, 2e-6)
	if n := KernelsRan(fused)[rowNormKernel{}.Name()]; n != 1 {
		t.Errorf("fused backend ran the row norm %d times, want 1", n)
	}
	if ran := KernelsRan(plain); len(ran) != 0 {
		t.Errorf("plain backend ran fused ops %v", ran)
	}
	if !strings.Contains(DescribeKernels(fused), "fused ops") || strings.Contains(DescribeKernels(plain), "fused ops") {
		t.Errorf("DescribeKernels: fused %q, plain %q", DescribeKernels(fused), DescribeKernels(plain))
	}
}

// TestAttentionIsOneOp checks that in an inference program on a backend with fused
// kernels Attention adds one fused op to a graph (instead of the dozen ops of its plain
// form).
func TestAttentionIsOneOp(t *testing.T) {
	b := goBackend(t, AllKernels)
	added := 0
	p, err := NewProgram(b, nil, t.Name(), func(_ Scope, in []*Node) []*Node {
		g := in[0].Graph()
		before := len(g.Nodes())
		out := Attention(in[0], in[1], in[2], 2)
		added = len(g.Nodes()) - before
		return []*Node{out}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	x := tensor.New(2, 5, 8)
	if _, err := p.Run(x, x, x); err != nil {
		t.Fatal(err)
	}
	if added != 1 {
		t.Fatalf("Attention added %d nodes, want 1 fused op", added)
	}
}

// TestFusedMatchesPlain compares every fused building block with its plain graph (the
// form XLA runs) on the same inputs: the same program on a backend with the fused kernels
// and on one without.
func TestFusedMatchesPlain(t *testing.T) {
	fusedB, plainB := goBackend(t, AllKernels), goBackend(t, Kernels{GEMM: true, Ops: true})
	r := rand.New(rand.NewPCG(21, 22))
	x5, x3 := randDense(r, 2, 8, 3, 4, 5), randDense(r, 2, 6, 16)
	gamma8, beta8, gamma16, beta16 := randDense(r, 8), randDense(r, 8), randDense(r, 16), randDense(r, 16)
	scale, shift := randDense(r, 2, 1, 16), randDense(r, 2, 6, 16)
	q, k, v := randDense(r, 2, 7, 16), randDense(r, 2, 9, 16), randDense(r, 2, 9, 16)
	bias := randDense(r, 1, 4, 7, 9)
	lw, lb, gw, gb := randDense(r, 12, 16), randDense(r, 12), randDense(r, 24, 16), randDense(r, 24)
	for _, tc := range []struct {
		name string
		fn   func(in []*Node) *Node
		ins  []*tensor.Dense
	}{
		{"group norm", func(in []*Node) *Node { return GroupNorm(in[0], in[1], in[2], 4, 1e-5) }, []*tensor.Dense{x5, gamma8, beta8}},
		{"group norm silu", func(in []*Node) *Node { return GroupNormSiLU(in[0], in[1], in[2], 2, 1e-6) }, []*tensor.Dense{x5, gamma8, beta8}},
		{"group norm no affine", func(in []*Node) *Node { return GroupNorm(in[0], nil, nil, 8, 1e-6) }, []*tensor.Dense{x5}},
		{"group norm frames silu", func(in []*Node) *Node { return GroupNormFramesSiLU(in[0], in[1], in[2], 4, 1e-6) }, []*tensor.Dense{x5, gamma8, beta8}},
		{"group norm apply", func(in []*Node) *Node { return GroupNormApply(in[0], in[1], in[2], in[3], 4, true) },
			[]*tensor.Dense{randDense(r, 2, 3, 8, 4, 5), randDense(r, 2, 4, 2), gamma8, beta8}},
		{"layer norm", func(in []*Node) *Node { return LayerNorm(in[0], in[1], in[2], 1e-5) }, []*tensor.Dense{x3, gamma16, beta16}},
		{"layer norm modulated", func(in []*Node) *Node { return LayerNormModulated(in[0], nil, nil, in[1], in[2], 1e-6) }, []*tensor.Dense{x3, scale, shift}},
		{"rms norm", func(in []*Node) *Node { return RMSNorm(in[0], in[1], 1e-6) }, []*tensor.Dense{x3, gamma16}},
		{"channel l2 norm silu", func(in []*Node) *Node { return ChannelL2NormSiLU(in[0], in[1], 1e-12) }, []*tensor.Dense{x5, gamma8}},
		{"linear", func(in []*Node) *Node { return Linear(in[0], in[1], in[2]) }, []*tensor.Dense{x3, lw, lb}},
		{"linear no bias", func(in []*Node) *Node { return Linear(in[0], in[1], nil) }, []*tensor.Dense{x3, lw}},
		{"linear gelu", func(in []*Node) *Node { return LinearAct(in[0], in[1], in[2], ActGELU) }, []*tensor.Dense{x3, lw, lb}},
		{"linear gelu tanh", func(in []*Node) *Node { return LinearAct(in[0], in[1], in[2], ActGELUTanh) }, []*tensor.Dense{x3, lw, lb}},
		{"linear silu", func(in []*Node) *Node { return LinearAct(in[0], in[1], in[2], ActSiLU) }, []*tensor.Dense{x3, lw, lb}},
		{"geglu", func(in []*Node) *Node { return GEGLU(in[0], in[1], in[2]) }, []*tensor.Dense{x3, gw, gb}},
		{"conv", func(in []*Node) *Node { return Conv2D(in[0], in[1], in[2], ConvOpts{Padding: 1}) }, []*tensor.Dense{randDense(r, 2, 3, 6, 7), randDense(r, 5, 3, 3, 3), randDense(r, 5)}},
		{"conv strided", func(in []*Node) *Node {
			return Conv2D(in[0], in[1], in[2], ConvOpts{Stride: 2, Pads: [][2]int{{0, 1}, {0, 1}}})
		}, []*tensor.Dense{randDense(r, 2, 3, 8, 8), randDense(r, 5, 3, 3, 3), randDense(r, 5)}},
		{"conv3d time", func(in []*Node) *Node { return Conv3DTime(in[0], in[1], in[2]) }, []*tensor.Dense{randDense(r, 1, 4, 5, 3, 3), randDense(r, 4, 4, 3, 1, 1), randDense(r, 4)}},
		{"attention", func(in []*Node) *Node { return Attention(in[0], in[1], in[2], 4) }, []*tensor.Dense{q, k, v}},
		{"attention with bias", func(in []*Node) *Node {
			out, ok := FusedAttention(in[0], in[1], in[2], in[3], 4, 1)
			if !ok {
				scores := DotGeneral(Reshape(in[0], 2, 7, 4, 4), []int{3}, []int{0, 2}, Reshape(in[1], 2, 9, 4, 4), []int{3}, []int{0, 2})
				p := Softmax(Add(scores, in[3]), -1)
				o := DotGeneral(p, []int{3}, []int{0, 1}, Reshape(in[2], 2, 9, 4, 4), []int{1}, []int{0, 2})
				return Reshape(TransposeAllAxes(o, 0, 2, 1, 3), 2, 7, 16)
			}
			return out
		}, []*tensor.Dense{q, k, v, bias}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fused := runOpOn(t, fusedB, tc.fn, tc.ins...)
			plain := runOpOn(t, plainB, tc.fn, tc.ins...)
			checkClose(t, tc.name, fused, plain, 2e-6)
		})
	}
}
