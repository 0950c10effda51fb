package nn

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"

	"github.com/vdpp/vdpp/tensor"
)

// A weight merged at load (Merger) and the same deltas applied in every call (a WithDeltas
// view) give the network the same bits; the merge is W + up·down + full within float32
// rounding; the base weights are left as they were.
func TestDeltasMergedEqualsView(t *testing.T) {
	b := testBackend(t)
	r := rand.New(rand.NewPCG(1, 2))
	w := map[string]*tensor.Dense{"lin.weight": randDense(r, 6, 5), "lin.bias": randDense(r, 6), "conv.weight": randDense(r, 4, 3, 2, 2)}
	deltas := map[string][]Delta{
		"lin.weight":  {{Up: randDense(r, 6, 2), Down: randDense(r, 2, 5)}, {Full: randDense(r, 6, 5)}},
		"lin.bias":    {{Full: randDense(r, 6)}},
		"conv.weight": {{Up: randDense(r, 4, 3), Down: randDense(r, 3, 12)}},
	}
	base, err := NewWeights(b, w)
	if err != nil {
		t.Fatal(err)
	}
	view, err := base.WithDeltas(deltas)
	if err != nil {
		t.Fatal(err)
	}
	m := NewMerger(b)
	defer m.Close()
	merged := map[string]*tensor.Dense{}
	for n, d := range w {
		if merged[n], err = m.Merge(n, d, deltas[n]); err != nil {
			t.Fatal(err)
		}
	}
	// W + up·down + full in float64, against the merge.
	want := make([]float64, 30)
	for o := range 6 {
		for i := range 5 {
			v := float64(w["lin.weight"].Data[o*5+i]) + float64(deltas["lin.weight"][1].Full.Data[o*5+i])
			for k := range 2 {
				v += float64(deltas["lin.weight"][0].Up.Data[o*2+k]) * float64(deltas["lin.weight"][0].Down.Data[k*5+i])
			}
			want[o*5+i] = v
		}
	}
	for i, v := range want {
		if math.Abs(float64(merged["lin.weight"].Data[i])-v) > 1e-5*(1+math.Abs(v)) {
			t.Fatalf("merged[%d] = %v, want %v", i, merged["lin.weight"].Data[i], v)
		}
	}
	mw, err := NewWeights(b, merged)
	if err != nil {
		t.Fatal(err)
	}
	build := func(s Scope, in []*graph.Node) []*graph.Node {
		y := Linear(in[0], s.Param(in[0].Graph(), "lin.weight", 6, 5), s.Param(in[0].Graph(), "lin.bias", 6))
		c := s.Param(in[0].Graph(), "conv.weight", 4, 3, 2, 2)
		return []*graph.Node{y, graph.ReduceAllSum(graph.Mul(c, c))}
	}
	x := randDense(r, 3, 5)
	run := func(ws *Weights) []*tensor.Dense {
		p, err := NewProgram(b, ws, "delta-test", build)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		out, err := p.Run(x)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	a, v, plain := run(mw), run(view), run(base)
	for i := range a {
		if !tensor.BitEqual(a[i], v[i]) {
			t.Fatalf("output %d: merged %v, view %v", i, a[i].Data, v[i].Data)
		}
		if tensor.BitEqual(a[i], plain[i]) {
			t.Fatalf("output %d: the deltas changed nothing", i)
		}
	}
	if again := run(base); !tensor.BitEqual(again[0], plain[0]) {
		t.Fatal("the view changed the base weights")
	}
	if view.DeltaBytes() != 4*(12+10+30+6+12+36) {
		t.Fatalf("DeltaBytes %d", view.DeltaBytes())
	}
	if _, err := base.WithDeltas(map[string][]Delta{"lin.weight": {{Up: randDense(r, 5, 2), Down: randDense(r, 2, 5)}}}); !errors.Is(err, ErrShapeMismatch) {
		t.Fatalf("mis-shaped delta: %v", err)
	}
	if _, err := base.WithDeltas(map[string][]Delta{"nope.weight": {{Full: randDense(r, 1)}}}); !errors.Is(err, ErrMissingTensor) {
		t.Fatalf("delta of an unknown weight: %v", err)
	}
}
