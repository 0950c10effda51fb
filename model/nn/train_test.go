package nn

import (
	"math/rand/v2"
	"testing"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import

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

// gradRun compiles a training graph returning [loss, d loss/d in[i]...] and runs it.
func gradRun(t *testing.T, loss func(in []*Node) *Node, ins ...*tensor.Dense) []*tensor.Dense {
	t.Helper()
	p, err := NewProgram(testBackend(t), nil, t.Name(), func(_ Scope, in []*Node) []*Node {
		MarkTraining(in[0].Graph())
		l := loss(in)
		return append([]*Node{l}, Gradient(l, in...)...)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	out, err := p.Run(ins...)
	if err != nil {
		t.Fatal(err)
	}
	return out
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

// TestPickAxisFormsAgree: the masked form of a training graph gives the bits of the slice.
func TestPickAxisFormsAgree(t *testing.T) {
	x := trainRand(3, 2, 3, 4)
	run := func(train bool) *tensor.Dense {
		p, err := NewProgram(testBackend(t), nil, t.Name(), func(_ Scope, in []*Node) []*Node {
			if train {
				MarkTraining(in[0].Graph())
			}
			return []*Node{PickAxis(in[0], 1, 1), PickAxis(in[0], 2, 3)}
		})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		out, err := p.Run(x)
		if err != nil {
			t.Fatal(err)
		}
		if !tensor.SameShape(out[0], &tensor.Dense{Shape: []int{2, 4}}) || !tensor.SameShape(out[1], &tensor.Dense{Shape: []int{2, 3}}) {
			t.Fatalf("shapes %v and %v, want [2 4] and [2 3]", out[0].Shape, out[1].Shape)
		}
		return &tensor.Dense{Shape: []int{14}, Data: append(append([]float32(nil), out[0].Data...), out[1].Data...)}
	}
	inference, training := run(false), run(true)
	for i := range inference.Data {
		if inference.Data[i] != training.Data[i] {
			t.Fatalf("element %d: %v sliced, %v masked", i, inference.Data[i], training.Data[i])
		}
	}
}

func TestGradientSafeOnlyInTraining(t *testing.T) {
	b := testBackend(t)
	g := NewGraph(b, "x")
	defer g.Finalize()
	if IsTraining(g) || GradientSafe(g) {
		t.Fatal("fresh graph marked")
	}
	MarkTraining(g)
	if !IsTraining(g) || GradientSafe(g) != IsSimpleGo(b) {
		t.Fatal("mark not seen")
	}
	if ConvFormForGraph(g) == ConvFormFor(b) && IsSimpleGo(b) {
		t.Fatal("training graph on simplego keeps the inference conv form")
	}
	UnmarkTraining(g)
	if IsTraining(g) {
		t.Fatal("unmark not seen")
	}
}
