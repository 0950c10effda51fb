package nn

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"

	"github.com/vdpp/vdpp/tensor"
	"github.com/vdpp/vdpp/tensor/quant"
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

// Deltas on weights held in a compact type: merged as they load (dequantize, merge,
// requantize: the merged weight is held in the type again) they equal the float32 merge
// rounded through the type; applied per call over the held weights (a view) they equal
// the float32 merge of the widened weight.
func TestDeltasHeld(t *testing.T) {
	b := testBackend(t)
	if !UsesKernels(b) {
		t.Skip("no fused CPU kernels on this backend")
	}
	r := rand.New(rand.NewPCG(5, 6))
	const out, in = 64, 256
	w := randDense(r, out, in)
	for i := range w.Data {
		w.Data[i] *= 0.05
	}
	ds := []Delta{{Up: randDense(r, out, 4), Down: randDense(r, 4, in)}}
	for i := range ds[0].Up.Data {
		ds[0].Up.Data[i] *= 0.01
	}
	x := randDense(r, 3, in)
	build := func(s Scope, in []*graph.Node) []*graph.Node {
		return []*graph.Node{Linear(in[0], s.Param(in[0].Graph(), "l.weight", out, 256), nil)}
	}
	run := func(ws *Weights) *tensor.Dense {
		p, err := NewProgram(b, ws, "held-delta", build)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		y, err := p.Run(x)
		if err != nil {
			t.Fatal(err)
		}
		return y[0]
	}
	m := NewMerger(b)
	defer m.Close()
	for _, typ := range []quant.Type{quant.BF16, quant.Q8_0} {
		t.Run(typ.String(), func(t *testing.T) {
			stored := storedAs(t, w, typ)
			load := func(add func(string, StoredTensor) error) error { return add("l.weight", stored) }
			merged, err := NewWeightsHeld(b, HoldAsStored, MergeStoredStream(b, HoldAsStored, load, map[string][]Delta{"l.weight": ds}))
			if err != nil {
				t.Fatal(err)
			}
			if ht, _ := merged.Held("l.weight"); ht != typ {
				t.Fatalf("merged weight held as %v, want %v", ht, typ)
			}
			wide, err := m.Merge("l.weight", widened(t, w, typ), ds)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := NewWeights(b, map[string]*tensor.Dense{"l.weight": widened(t, wide, typ)})
			if err != nil {
				t.Fatal(err)
			}
			if rel := tensor.RelL2(run(merged), run(ref)); rel > 1e-2 {
				t.Errorf("merged and requantized: rel L2 %.3g vs the float32 merge rounded through %v", rel, typ)
			}
			held, err := NewWeightsHeld(b, HoldAsStored, load)
			if err != nil {
				t.Fatal(err)
			}
			view, err := held.WithDeltas(map[string][]Delta{"l.weight": ds})
			if err != nil {
				t.Fatal(err)
			}
			f32, err := NewWeights(b, map[string]*tensor.Dense{"l.weight": wide})
			if err != nil {
				t.Fatal(err)
			}
			if rel := tensor.RelL2(run(view), run(f32)); rel > 1e-5 {
				t.Errorf("per call over held weights: rel L2 %.3g vs the float32 merge of the widened weight", rel)
			}
		})
	}
	// A float32 file held as q8_0 (HoldAs): the merged weight is requantized to q8_0.
	f32 := storedAs(t, w, quant.F32)
	load := func(add func(string, StoredTensor) error) error { return add("l.weight", f32) }
	hold := HoldAs(quant.Q8_0)
	merged, err := NewWeightsHeld(b, hold, MergeStoredStream(b, hold, load, map[string][]Delta{"l.weight": ds}))
	if err != nil {
		t.Fatal(err)
	}
	if ht, _ := merged.Held("l.weight"); ht != quant.Q8_0 {
		t.Fatalf("merged weight of a float32 file held as %v, want q8_0", ht)
	}
	if _, err := NewWeightsHeld(b, hold, MergeStoredStream(b, hold, load, map[string][]Delta{"other.weight": ds})); err == nil {
		t.Fatal("a delta for a weight the stream lacks was accepted")
	}
}

// TestHeldDeltasWithoutKernels is a LoRA over weights held on a backend without vdpp's
// kernels (go:kernels=off, as XLA): merged at load, a q8_0 file's weight is held as the
// float32 merge of its stored values (not quantized again: the backend holds q8_0 in
// float32 anyway) and a bf16 file's as that merge rounded to bf16; applied in every call
// (WithDeltas) over a bf16-held weight, the view computes the float32 merge of the bf16
// values.
func TestHeldDeltasWithoutKernels(t *testing.T) {
	b, err := NewBackend("go:kernels=off")
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 6))
	const out, in = 16, 64
	w := randDense(r, out, in)
	ds := []Delta{{Up: randDense(r, out, 4), Down: randDense(r, 4, in)}}
	x := randDense(r, 3, in)
	build := func(s Scope, in []*graph.Node) []*graph.Node {
		wn := s.Param(in[0].Graph(), "l.weight", out, 64)
		return []*graph.Node{Linear(in[0], wn, nil), graph.AddScalar(wn, 0)}
	}
	m := NewMerger(b)
	defer m.Close()
	for _, tc := range []struct{ stored, held quant.Type }{{quant.Q8_0, quant.F32}, {quant.BF16, quant.BF16}} {
		t.Run(tc.stored.String(), func(t *testing.T) {
			load := func(add func(string, StoredTensor) error) error { return add("l.weight", storedAs(t, w, tc.stored)) }
			merged, err := NewWeightsHeld(b, HoldAsStored, MergeStoredStream(b, HoldAsStored, load, map[string][]Delta{"l.weight": ds}))
			if err != nil {
				t.Fatal(err)
			}
			if ht, _ := merged.Held("l.weight"); ht != tc.held {
				t.Fatalf("merged weight held as %v, want %v", ht, tc.held)
			}
			wide, err := m.Merge("l.weight", widened(t, w, tc.stored), ds)
			if err != nil {
				t.Fatal(err)
			}
			want := wide
			if tc.held != quant.F32 {
				want = widened(t, wide, tc.held)
			}
			ref, err := NewWeights(b, map[string]*tensor.Dense{"l.weight": want})
			if err != nil {
				t.Fatal(err)
			}
			got, exp := runProgram(t, merged, build, x), runProgram(t, ref, build, x)
			for i := range got {
				if rel := relL2(got[i].Data, exp[i].Data); rel != 0 {
					t.Errorf("merged at load, output %d: relative L2 %.3g against the float32 merge held as %v, want bit for bit", i, rel, tc.held)
				}
			}
			if tc.held == quant.F32 {
				return
			}
			held, err := NewWeightsHeld(b, HoldAsStored, load)
			if err != nil {
				t.Fatal(err)
			}
			view, err := held.WithDeltas(map[string][]Delta{"l.weight": ds})
			if err != nil {
				t.Fatal(err)
			}
			f32, err := NewWeights(b, map[string]*tensor.Dense{"l.weight": wide})
			if err != nil {
				t.Fatal(err)
			}
			got, exp = runProgram(t, view, build, x), runProgram(t, f32, build, x)
			for i := range got {
				if rel := relL2(got[i].Data, exp[i].Data); rel != 0 {
					t.Errorf("applied per call, output %d: relative L2 %.3g against the float32 merge of the bf16 weight, want bit for bit", i, rel)
				}
			}
		})
	}
}
