package nn

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/vdpp/vdpp/tensor"
	"github.com/vdpp/vdpp/tensor/quant"
)

// Delta is a change to one weight (a LoRA's): W + Up·Down, with Up [out, r] and Down
// [r, in] where in is the product of W's other dimensions (a convolution's weight is
// reshaped to [out, in] and back), or W + Full with Full of W's shape.
type Delta struct {
	Up, Down, Full *tensor.Dense
}

// check reports a delta that does not fit a weight of shape dims.
func (d Delta) check(name string, dims []int) error {
	if d.Full != nil {
		if !slices.Equal(d.Full.Shape, dims) {
			return fmt.Errorf("%w: delta of %q is %v, the weight %v", ErrShapeMismatch, name, d.Full.Shape, dims)
		}
		return nil
	}
	if d.Up == nil || d.Down == nil || len(d.Up.Shape) != 2 || len(d.Down.Shape) != 2 || len(dims) < 2 ||
		d.Up.Shape[0] != dims[0] || d.Up.Shape[1] != d.Down.Shape[0] || d.Down.Shape[1] != tensor.NumElements(dims[1:]) {
		var up, down []int
		if d.Up != nil {
			up = d.Up.Shape
		}
		if d.Down != nil {
			down = d.Down.Shape
		}
		return fmt.Errorf("%w: delta factors of %q are %v x %v, the weight %v", ErrShapeMismatch, name, up, down, dims)
	}
	return nil
}

// applyDeltas is w with each delta added in order: w + up_0·down_0 + full_1 + ..., every
// sum and product in float32 graph ops. MergeDeltas and a WithDeltas view both build
// exactly this, so a weight merged at load and one applied in every call hold the same bits.
func applyDeltas(w *graph.Node, deltas []deltaNodes) *graph.Node {
	dims := w.Shape().Dimensions
	for _, d := range deltas {
		if d.full != nil {
			w = graph.Add(w, d.full)
			continue
		}
		prod := graph.MatMul(d.up, d.down)
		w = graph.Add(w, graph.Reshape(prod, dims...))
	}
	return w
}

type deltaNodes struct{ up, down, full *graph.Node }

// deltaPattern names the kinds of a delta list ("f" factors, "w" whole), which fixes the
// inputs of a merge program.
func deltaPattern(ds []Delta) string {
	var b strings.Builder
	for _, d := range ds {
		if d.Full != nil {
			b.WriteByte('w')
		} else {
			b.WriteByte('f')
		}
	}
	return b.String()
}

// Merger merges deltas into weights on one backend (MergeDeltas), keeping a compiled
// program per kind of delta list. It is safe for concurrent use.
type Merger struct {
	b     backends.Backend
	mu    sync.Mutex
	progs map[string]*Program
}

// NewMerger returns a Merger on backend b.
func NewMerger(b backends.Backend) *Merger { return &Merger{b: b, progs: map[string]*Program{}} }

// Merge returns w with deltas applied (a new tensor; w is not modified), computed on the
// merger's backend by the graph ops a WithDeltas view runs (applyDeltas).
func (m *Merger) Merge(name string, w *tensor.Dense, deltas []Delta) (*tensor.Dense, error) {
	if len(deltas) == 0 {
		return w, nil
	}
	for _, d := range deltas {
		if err := d.check(name, w.Shape); err != nil {
			return nil, err
		}
	}
	pat := deltaPattern(deltas)
	m.mu.Lock()
	p := m.progs[pat]
	if p == nil {
		var err error
		p, err = NewProgram(m.b, nil, "merge-"+pat, func(_ Scope, in []*graph.Node) []*graph.Node {
			var ds []deltaNodes
			i := 1
			for _, c := range pat {
				if c == 'w' {
					ds = append(ds, deltaNodes{full: in[i]})
					i++
				} else {
					ds = append(ds, deltaNodes{up: in[i], down: in[i+1]})
					i += 2
				}
			}
			return []*graph.Node{applyDeltas(in[0], ds)}
		})
		if err != nil {
			m.mu.Unlock()
			return nil, err
		}
		m.progs[pat] = p
	}
	m.mu.Unlock()
	in := []*tensor.Dense{w}
	for _, d := range deltas {
		if d.Full != nil {
			in = append(in, d.Full)
		} else {
			in = append(in, d.Up, d.Down)
		}
	}
	out, err := p.Run(in...)
	if err != nil {
		return nil, fmt.Errorf("nn: merge %q: %w", name, err)
	}
	return out[0], nil
}

// Close releases the compiled programs.
func (m *Merger) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var first error
	for _, p := range m.progs {
		if err := p.Close(); err != nil && first == nil {
			first = err
		}
	}
	m.progs = map[string]*Program{}
	return first
}

// deltaVar names the variable of a view's delta tensor.
func deltaVar(name string, i int, part string) string {
	return fmt.Sprintf("delta~%s~%d~%s", name, i, part)
}

// WithDeltas returns a view of w whose graphs read each weight named in deltas with its
// deltas applied in the graph at every call (applyDeltas); the other weights are w's, and
// every weight's memory is shared with w (the view holds only the deltas' tensors, uploaded
// to w's backend). A weight w holds in a compact type is widened for the sum in every call
// (the layer then reads it in float32). A weight the view does not hold, or a delta that
// does not fit it, is an error. Programs built over the view (NewProgram) run with w's
// weights unchanged.
func (w *Weights) WithDeltas(deltas map[string][]Delta) (*Weights, error) {
	v := &Weights{backend: w.backend, ctx: context.New(), shapes: map[string][]int{}, deltas: map[string][]string{},
		held: w.held, types: map[quant.Type]int64{}}
	names := make([]string, 0, len(w.shapes))
	for n := range w.shapes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		src := w.ctx.GetVariableByScopeAndName(w.ctx.Scope(), n)
		if src == nil {
			return nil, fmt.Errorf("%w %q (no variable)", ErrMissingTensor, n)
		}
		val, err := src.Value()
		if err != nil {
			return nil, fmt.Errorf("nn: tensor %q: %w", n, err)
		}
		if err := catch(func() { v.ctx.VariableWithValue(n, val).SetTrainable(false) }); err != nil {
			return nil, fmt.Errorf("nn: tensor %q: %w", n, err)
		}
		v.shapes[n] = w.shapes[n]
	}
	dnames := make([]string, 0, len(deltas))
	for n := range deltas {
		dnames = append(dnames, n)
	}
	sort.Strings(dnames)
	for _, n := range dnames {
		dims, ok := w.shapes[n]
		if !ok {
			return nil, fmt.Errorf("%w %q: a delta for a weight the model does not hold", ErrMissingTensor, n)
		}
		for i, d := range deltas[n] {
			if err := d.check(n, dims); err != nil {
				return nil, err
			}
			parts := map[string]*tensor.Dense{"up": d.Up, "down": d.Down}
			kinds := []string{"up", "down"}
			if d.Full != nil {
				parts, kinds = map[string]*tensor.Dense{"full": d.Full}, []string{"full"}
			}
			for _, k := range kinds {
				t, err := deviceTensor(w.backend, parts[k])
				if err != nil {
					return nil, fmt.Errorf("nn: delta of %q: %w", n, err)
				}
				vn := deltaVar(n, i, k)
				if err := catch(func() { v.ctx.VariableWithValue(vn, t).SetTrainable(false) }); err != nil {
					return nil, fmt.Errorf("nn: delta of %q: %w", n, err)
				}
				v.deltaBytes += int64(4 * len(parts[k].Data))
			}
			v.deltas[n] = append(v.deltas[n], deltaPattern([]Delta{d}))
		}
	}
	return v, nil
}

// deltaParam is a view's param: the weight's node with its deltas applied.
func (w *Weights) deltaParam(g *graph.Graph, name string, node *graph.Node) *graph.Node {
	kinds := w.deltas[name]
	if len(kinds) == 0 {
		return node
	}
	get := func(i int, part string) *graph.Node {
		return w.ctx.GetVariableByScopeAndName(w.ctx.Scope(), deltaVar(name, i, part)).ValueGraph(g)
	}
	ds := make([]deltaNodes, len(kinds))
	for i, k := range kinds {
		if k == "w" {
			ds[i] = deltaNodes{full: get(i, "full")}
		} else {
			ds[i] = deltaNodes{up: get(i, "up"), down: get(i, "down")}
		}
	}
	return applyDeltas(node, ds)
}

// DeltaBytes is the memory a view's deltas hold (0 for weights that are not a view).
func (w *Weights) DeltaBytes() int64 { return w.deltaBytes }

// MergeStream wraps a weight stream (NewWeightsStream's load) so that every tensor named in
// deltas is merged with its deltas on backend b (Merger) as it passes; a delta for a tensor
// the stream never yields is an error.
func MergeStream(b backends.Backend, load func(add func(string, *tensor.Dense) error) error, deltas map[string][]Delta) func(add func(string, *tensor.Dense) error) error {
	if len(deltas) == 0 {
		return load
	}
	return func(add func(string, *tensor.Dense) error) error {
		m := NewMerger(b)
		defer m.Close()
		seen := map[string]bool{}
		err := load(func(name string, d *tensor.Dense) error {
			ds, ok := deltas[name]
			if !ok {
				return add(name, d)
			}
			seen[name] = true
			merged, err := m.Merge(name, d, ds)
			if err != nil {
				return err
			}
			return add(name, merged)
		})
		if err != nil {
			return err
		}
		if len(seen) != len(deltas) {
			for n := range deltas {
				if seen[n] {
					continue
				}
				return fmt.Errorf("%w %q: a delta for a weight the checkpoint does not hold", ErrMissingTensor, n)
			}
		}
		return nil
	}
}

// MergeStoredStream is MergeStream for tensors as stored (NewWeightsHeld's load, with the
// same hold): a tensor named in deltas is widened to float32, merged (Merger) and handed on
// converted to the type hold gives it (within what b holds: Holding), so NewWeightsHeld
// holds it as it would have held the tensor without deltas: dequantize, merge, requantize,
// row by row in the type's blocks; on a backend that holds the type in float32 the merged
// values pass as they are. The other tensors pass as they are.
func MergeStoredStream(b backends.Backend, hold HoldFunc, load func(add func(string, StoredTensor) error) error, deltas map[string][]Delta) func(add func(string, StoredTensor) error) error {
	if len(deltas) == 0 {
		return load
	}
	return func(add func(string, StoredTensor) error) error {
		m := NewMerger(b)
		defer m.Close()
		holding := HoldingOf(b)
		seen := map[string]bool{}
		err := load(func(name string, t StoredTensor) error {
			ds, ok := deltas[name]
			if !ok {
				return add(name, t)
			}
			seen[name] = true
			w := tensor.New(t.Shape...)
			if len(w.Data) > 0 {
				if err := convertRows(t.Type, t.Data, quant.F32, nil, w.Data, t.Shape); err != nil {
					return fmt.Errorf("nn: tensor %q: %w", name, err)
				}
			}
			merged, err := m.Merge(name, w, ds)
			if err != nil {
				return err
			}
			raw := make([]byte, 4*len(merged.Data))
			for i, v := range merged.Data {
				binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(v))
			}
			st := StoredTensor{Shape: merged.Shape, Type: quant.F32, Data: raw}
			ht := quant.F32
			if hold != nil {
				ht = holding.Type(hold(name, t.Shape, t.Type))
			}
			if ht != quant.F32 && len(merged.Data) > 0 {
				rb, err := ht.RowBytes(t.Shape[len(t.Shape)-1])
				if err != nil {
					return fmt.Errorf("nn: tensor %q: %w", name, err)
				}
				dst := make([]byte, rb*(len(merged.Data)/t.Shape[len(t.Shape)-1]))
				if err := convertRows(quant.F32, raw, ht, dst, nil, t.Shape); err != nil {
					return fmt.Errorf("nn: tensor %q: %w", name, err)
				}
				st = StoredTensor{Shape: merged.Shape, Type: ht, Data: dst}
			}
			return add(name, st)
		})
		if err != nil {
			return err
		}
		if len(seen) != len(deltas) {
			for n := range deltas {
				if !seen[n] {
					return fmt.Errorf("%w %q: a delta for a weight the checkpoint does not hold", ErrMissingTensor, n)
				}
			}
		}
		return nil
	}
}
