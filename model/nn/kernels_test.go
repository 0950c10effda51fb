package nn

import (
	"math/rand/v2"
	"os"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import
	"github.com/gomlx/gomlx/pkg/core/shapes"

	"github.com/vdpp/vdpp/internal/gemm"
	"github.com/vdpp/vdpp/internal/sghook"
	"github.com/vdpp/vdpp/tensor"
)

// TestCPUKernelsInstalled fails when vdpp could not install its CPU kernels into simplego:
// the sign that a GoMLX upgrade changed what internal/sghook relies on.
func TestCPUKernelsInstalled(t *testing.T) {
	parts, err := CPUKernels()
	want := sghook.All
	switch os.Getenv(KernelsEnv) {
	case "off":
		want = 0
	case "gemm":
		want = sghook.GEMM
	}
	if !gemm.Accelerated() {
		want &^= sghook.GEMM
	}
	if err != nil || parts != want {
		t.Fatalf("CPUKernels() = %b, %v; want %b installed", parts, err, want)
	}
	if got := UsesKernels(testBackend(t)); got != (want&sghook.Fused != 0 && IsSimpleGo(testBackend(t))) {
		t.Errorf("UsesKernels = %v with %b installed", got, parts)
	}
}

// TestAttentionIsOneOp checks that with the kernels installed Attention adds one fused op
// to a graph (instead of the dozen ops of its plain form).
func TestAttentionIsOneOp(t *testing.T) {
	b := testBackend(t)
	if !UsesKernels(b) {
		t.Skip("no fused CPU kernels on this backend")
	}
	g := NewGraph(b, t.Name())
	defer g.Finalize()
	sh := shapes.Make(dtypes.Float32, 2, 5, 8)
	q, k, v := Parameter(g, "q", sh), Parameter(g, "k", sh), Parameter(g, "v", sh)
	before := len(g.Nodes())
	Attention(q, k, v, 2)
	if added := len(g.Nodes()) - before; added != 1 {
		t.Fatalf("Attention added %d nodes, want 1 fused op", added)
	}
}

// TestFusedMatchesPlain compares every fused building block with its plain graph (the
// form XLA runs) on the same inputs.
func TestFusedMatchesPlain(t *testing.T) {
	if !UsesKernels(testBackend(t)) {
		t.Skip("no fused CPU kernels on this backend")
	}
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
			fused := runOp(t, tc.fn, tc.ins...)
			plainGraphs.Store(true)
			defer plainGraphs.Store(false)
			plain := runOp(t, tc.fn, tc.ins...)
			checkClose(t, tc.name, fused, plain, 2e-6)
		})
	}
}
