package nn

import (
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/backends"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/vdpp/vdpp/tensor"
)

func trainRand(seed uint64, shape ...int) *tensor.Dense {
	r := rand.New(rand.NewPCG(seed, 7))
	t := tensor.New(shape...)
	for i := range t.Data {
		t.Data[i] = float32(r.NormFloat64())
	}
	return t
}

// TestConvGatherMatchesIm2Col: the training form computes what the inference form does.
func TestConvGatherMatchesIm2Col(t *testing.T) {
	for _, tc := range []struct {
		name   string
		x, w   []int
		opts   ConvOpts
		conv3d bool
	}{
		{"3x3 pad 1", []int{2, 3, 6, 5}, []int{4, 3, 3, 3}, ConvOpts{Padding: 1}, false},
		{"3x3 stride 2 pads (0,1)", []int{1, 2, 7, 8}, []int{3, 2, 3, 3}, ConvOpts{Stride: 2, Pads: [][2]int{{0, 1}, {0, 1}}}, false},
		{"1x1", []int{2, 4, 3, 3}, []int{5, 4, 1, 1}, ConvOpts{}, false},
		{"time 3x1x1", []int{1, 3, 5, 2, 2}, []int{3, 3, 3, 1, 1}, ConvOpts{Pads: [][2]int{{1, 1}, {0, 0}, {0, 0}}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, w := trainRand(1, tc.x...), trainRand(2, tc.w...)
			run := func(form ConvForm) *tensor.Dense {
				o := tc.opts
				o.Form = form
				return runOp(t, func(in []*Node) *Node {
					if tc.conv3d {
						return Conv3D(in[0], in[1], nil, o)
					}
					return Conv2D(in[0], in[1], nil, o)
				}, x, w)
			}
			checkClose(t, tc.name, run(ConvGather), run(ConvIm2Col), tol)
		})
	}
}

// trainGraph runs fn as a training step is built: a graph of its own (no Program) on
// backend b, with nothing marked, and returns its outputs.
func trainGraph(t *testing.T, b backends.Backend, fn func(in []*Node) []*Node, ins ...*tensor.Dense) []*tensor.Dense {
	t.Helper()
	e, err := NewExec(b, fn)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Finalize()
	args := make([]any, len(ins))
	for i, in := range ins {
		args[i] = tensors.FromFlatDataAndDimensions(in.Data, in.Shape...)
	}
	outs, err := e.Exec(args...)
	if err != nil {
		t.Fatal(err)
	}
	res := make([]*tensor.Dense, len(outs))
	for i, o := range outs {
		if res[i], err = toDense(o); err != nil {
			t.Fatal(err)
		}
		o.FinalizeAll()
	}
	return res
}

// gradRun builds a training graph returning [loss, d loss/d in[i]...] on the test backend
// and runs it.
func gradRun(t *testing.T, loss func(in []*Node) *Node, ins ...*tensor.Dense) []*tensor.Dense {
	t.Helper()
	return trainGraph(t, testBackend(t), func(in []*Node) []*Node {
		l := loss(in)
		return append([]*Node{l}, Gradient(l, in...)...)
	}, ins...)
}

// TestTrainingGradients checks gradients of losses that are linear in each input (so a
// central difference is exact up to float rounding) through the training forms: the
// gathered convolution, the masked GEGLU split and the replaced DotGeneral gradient.
func TestTrainingGradients(t *testing.T) {
	for _, tc := range []struct {
		name   string
		shapes [][]int
		loss   func(in []*Node) *Node
	}{
		{"conv stride 2", [][]int{{1, 2, 5, 5}, {3, 2, 3, 3}, {1, 3, 3, 3}}, func(in []*Node) *Node {
			return ReduceAllSum(Mul(Conv2D(in[0], in[1], nil, ConvOpts{Stride: 2, Padding: 1}), in[2]))
		}},
		{"batched dot", [][]int{{2, 3, 4}, {2, 4, 5}, {2, 3, 5}}, func(in []*Node) *Node {
			return ReduceAllSum(Mul(DotGeneral(in[0], []int{2}, []int{0}, in[1], []int{1}, []int{0}), in[2]))
		}},
		{"dot contracting first axes", [][]int{{4, 3}, {5, 4}, {3, 5}}, func(in []*Node) *Node {
			return ReduceAllSum(Mul(DotGeneral(in[0], []int{0}, nil, in[1], []int{1}, nil), in[2]))
		}},
		{"split halves", [][]int{{2, 6}, {2, 3}, {2, 3}}, func(in []*Node) *Node {
			a, b := SplitHalves(in[0])
			return Add(ReduceAllSum(Mul(a, in[1])), ReduceAllSum(Mul(b, in[2])))
		}},
		{"pick axis", [][]int{{2, 3, 4}, {2, 4}, {3, 4}}, func(in []*Node) *Node {
			return Add(ReduceAllSum(Mul(PickAxis(in[0], 1, 2), in[1])), ReduceAllSum(Mul(PickAxis(in[1], 0, 1), PickAxis(in[2], -2, 0))))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ins := make([]*tensor.Dense, len(tc.shapes))
			for i, s := range tc.shapes {
				ins[i] = trainRand(uint64(10+i), s...)
			}
			out := gradRun(t, tc.loss, ins...)
			for wrt := 0; wrt < 2; wrt++ {
				grad := out[1+wrt]
				for _, idx := range []int{0, len(ins[wrt].Data) / 2, len(ins[wrt].Data) - 1} {
					const h = 0.5
					orig := ins[wrt].Data[idx]
					ins[wrt].Data[idx] = orig + h
					up := gradRun(t, tc.loss, ins...)[0].Data[0]
					ins[wrt].Data[idx] = orig - h
					down := gradRun(t, tc.loss, ins...)[0].Data[0]
					ins[wrt].Data[idx] = orig
					fd := (up - down) / (2 * h)
					if d := fd - grad.Data[idx]; d > 1e-3 || d < -1e-3 {
						t.Fatalf("input %d [%d]: gradient %v, finite difference %v", wrt, idx, grad.Data[idx], fd)
					}
				}
			}
		})
	}
}

// TestPickAxisFormsAgree: the masked form of a training graph gives the bits of the slice
// an inference program takes.
func TestPickAxisFormsAgree(t *testing.T) {
	x := trainRand(3, 2, 3, 4)
	pick := func(in []*Node) []*Node { return []*Node{PickAxis(in[0], 1, 1), PickAxis(in[0], 2, 3)} }
	p, err := NewProgram(testBackend(t), nil, t.Name(), func(_ Scope, in []*Node) []*Node { return pick(in) })
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	inference, err := p.Run(x)
	if err != nil {
		t.Fatal(err)
	}
	training := trainGraph(t, testBackend(t), pick, x)
	for i := range inference {
		if !tensor.SameShape(inference[i], training[i]) || !slices.Equal(inference[i].Data, training[i].Data) {
			t.Fatalf("output %d: %v sliced, %v masked", i, inference[i], training[i])
		}
	}
}

// TestGradientSafeOutsidePrograms: on simplego every graph but a Program's takes the
// gradient-safe forms, with nothing marked.
func TestGradientSafeOutsidePrograms(t *testing.T) {
	b := goBackend(t, AllKernels)
	g := NewGraph(b, "x")
	defer g.Finalize()
	if !GradientSafe(g) || ConvFormForGraph(g) != ConvGather {
		t.Fatal("a graph of its own is not gradient-safe")
	}
	var inProgram bool
	p, err := NewProgram(b, nil, t.Name(), func(_ Scope, in []*Node) []*Node {
		inProgram = GradientSafe(in[0].Graph())
		return in
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.Run(tensor.New(2)); err != nil {
		t.Fatal(err)
	}
	if inProgram {
		t.Fatal("an inference program's graph takes the gradient-safe forms")
	}
}

// TestUnmarkedTrainingGradients: a training graph built on a backend with every CPU kernel,
// with nothing marked, gets the plain, differentiable forms of the blocks that an inference
// program fuses (norms, linear layers, GEGLU, attention, convolutions): no fused op runs
// and its gradients match central differences.
func TestUnmarkedTrainingGradients(t *testing.T) {
	b := goBackend(t, AllKernels)
	for _, tc := range []struct {
		name   string
		shapes [][]int
		fn     func(in []*Node) *Node
	}{
		{"group norm silu", [][]int{{1, 4, 3, 2}, {4}, {4}}, func(in []*Node) *Node { return GroupNormSiLU(in[0], in[1], in[2], 2, 1e-5) }},
		{"layer norm modulated", [][]int{{1, 3, 8}, {1, 1, 8}, {1, 3, 8}}, func(in []*Node) *Node {
			return LayerNormModulated(in[0], nil, nil, in[1], in[2], 1e-6)
		}},
		{"rms norm", [][]int{{2, 8}, {8}}, func(in []*Node) *Node { return RMSNorm(in[0], in[1], 1e-6) }},
		{"linear gelu", [][]int{{3, 8}, {5, 8}, {5}}, func(in []*Node) *Node { return LinearAct(in[0], in[1], in[2], ActGELU) }},
		{"geglu", [][]int{{3, 8}, {10, 8}, {10}}, func(in []*Node) *Node { return GEGLU(in[0], in[1], in[2]) }},
		{"attention", [][]int{{1, 3, 8}, {1, 4, 8}, {1, 4, 8}}, func(in []*Node) *Node { return AttentionAuto(in[0], in[1], in[2], 2) }},
		{"conv", [][]int{{1, 2, 4, 4}, {3, 2, 3, 3}, {3}}, func(in []*Node) *Node {
			return Conv2D(in[0], in[1], in[2], ConvOpts{Padding: 1})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ins := make([]*tensor.Dense, len(tc.shapes))
			for i, s := range tc.shapes {
				ins[i] = trainRand(uint64(20+i), s...)
			}
			// A fixed random projection of the output makes a scalar loss whose gradient
			// reaches every output element.
			var proj *tensor.Dense
			loss := func(in []*Node) *Node {
				y := tc.fn(in)
				if proj == nil {
					proj = trainRand(99, y.Shape().Dimensions...)
				}
				return ReduceAllSum(Mul(y, Reshape(Const(y.Graph(), proj.Data), proj.Shape...)))
			}
			ranBefore := KernelsRan(b)
			out := trainGraph(t, b, func(in []*Node) []*Node {
				l := loss(in)
				return append([]*Node{l}, Gradient(l, in...)...)
			}, ins...)
			if ran := KernelsRan(b); !maps.Equal(ran, ranBefore) {
				t.Fatalf("fused ops ran in a training graph: %v", ran)
			}
			value := func() float64 {
				return float64(trainGraph(t, b, func(in []*Node) []*Node { return []*Node{loss(in)} }, ins...)[0].Data[0])
			}
			for wrt := range ins {
				grad := out[1+wrt]
				var norm float64
				for _, g := range grad.Data {
					norm += float64(g) * float64(g)
				}
				if norm == 0 {
					t.Fatalf("input %d: zero gradient", wrt)
				}
				for _, idx := range []int{0, len(ins[wrt].Data) / 2, len(ins[wrt].Data) - 1} {
					const h = 1e-2
					orig := ins[wrt].Data[idx]
					ins[wrt].Data[idx] = orig + h
					up := value()
					ins[wrt].Data[idx] = orig - h
					down := value()
					ins[wrt].Data[idx] = orig
					fd := (up - down) / (2 * h)
					if d := math.Abs(fd - float64(grad.Data[idx])); d > 2e-2*max(1, math.Abs(fd)) {
						t.Fatalf("input %d [%d]: gradient %v, central difference %v", wrt, idx, grad.Data[idx], fd)
					}
				}
			}
		})
	}
}
