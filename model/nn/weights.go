package nn

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/vdpp/vdpp/internal/sghook"
	"github.com/vdpp/vdpp/tensor"
	"github.com/vdpp/vdpp/tensor/quant"
)

// Sentinel errors of the weights API, matched with errors.Is.
var (
	// ErrMissingTensor: a network asked for (or declared) a tensor the weights lack.
	ErrMissingTensor = errors.New("nn: missing tensor")
	// ErrUnexpectedTensor: the weights hold a tensor no network declared.
	ErrUnexpectedTensor = errors.New("nn: unexpected tensor")
	// ErrShapeMismatch: a tensor's shape differs from the declared one.
	ErrShapeMismatch = errors.New("nn: shape mismatch")
)

// Weights holds named tensors materialised on one backend (one backend buffer per tensor;
// the caller's data may be dropped after NewWeights returns): float32, or held in a compact
// weight type (NewWeightsHeld). It is safe for concurrent reads; it is never modified after
// construction.
type Weights struct {
	backend backends.Backend
	ctx     *context.Context
	shapes  map[string][]int
	held    map[string]*heldWeight // the tensors held in a compact type
	types   map[quant.Type]int64   // bytes held in each type
	bytes   int64
	// deltas, in a view (WithDeltas), are the kinds of each changed weight's deltas,
	// applied in the graph; deltaBytes their memory.
	deltas     map[string][]string
	deltaBytes int64
}

func newContext() *context.Context { return context.New() }

// NewWeights copies every tensor of ts onto backend b, keeping its name. Names must be
// non-empty and must not contain '/', the separator of GoMLX's context scopes.
func NewWeights(b backends.Backend, ts map[string]*tensor.Dense) (*Weights, error) {
	names := make([]string, 0, len(ts))
	for n := range ts {
		names = append(names, n)
	}
	sort.Strings(names)
	return NewWeightsStream(b, func(add func(string, *tensor.Dense) error) error {
		for _, name := range names {
			if err := add(name, ts[name]); err != nil {
				return err
			}
		}
		return nil
	})
}

// NewWeightsStream is NewWeights for tensors produced one at a time: load calls add for
// each tensor, which copies it onto backend b at once, so the caller may drop each
// tensor's data as soon as add returns (a loader reading a multi-GB checkpoint then holds
// one tensor at a time besides the backend's copies). Names follow NewWeights' rules and
// must not repeat. The first error of add or load is returned.
func NewWeightsStream(b backends.Backend, load func(add func(name string, d *tensor.Dense) error) error) (*Weights, error) {
	w := &Weights{backend: b, ctx: newContext(), shapes: map[string][]int{}, held: map[string]*heldWeight{}, types: map[quant.Type]int64{}}
	if err := load(w.add); err != nil {
		return nil, err
	}
	return w, nil
}

// checkName reports a name NewWeights refuses: empty, with a '/', or added before.
func (w *Weights) checkName(name string) error {
	if name == "" || strings.Contains(name, "/") {
		return fmt.Errorf("nn: invalid tensor name %q", name)
	}
	if _, dup := w.shapes[name]; dup {
		return fmt.Errorf("nn: tensor %q added twice", name)
	}
	return nil
}

// add uploads one float32 tensor.
func (w *Weights) add(name string, d *tensor.Dense) error {
	if err := w.checkName(name); err != nil {
		return err
	}
	if d == nil || len(d.Data) != tensor.NumElements(d.Shape) {
		return fmt.Errorf("nn: tensor %q: data does not match its shape", name)
	}
	t, err := deviceTensor(w.backend, d)
	if err != nil {
		return fmt.Errorf("nn: tensor %q: %w", name, err)
	}
	if err := catch(func() { w.ctx.VariableWithValue(name, t).SetTrainable(false) }); err != nil {
		return fmt.Errorf("nn: tensor %q: %w", name, err)
	}
	w.shapes[name] = slices.Clone(d.Shape)
	w.bytes += int64(4 * len(d.Data))
	w.types[quant.F32] += int64(4 * len(d.Data))
	return nil
}

// deviceTensor uploads d into a backend buffer owned by the returned tensor (no local copy
// is kept).
func deviceTensor(b backends.Backend, d *tensor.Dense) (*tensors.Tensor, error) {
	buf, err := b.BufferFromFlatData(0, d.Data, shapes.Make(dtypes.Float32, d.Shape...))
	if err != nil {
		return nil, err
	}
	return tensors.FromBuffer(b, buf)
}

// Backend returns the backend the weights live on.
func (w *Weights) Backend() backends.Backend { return w.backend }

// Free releases the weights' backend buffers now, so their memory leaves the process at
// the next collection instead of when the last reference to them goes (a Program built on
// them, a stepper holding the model). Nothing may use the weights, or a Program built on
// them, afterwards; freeing twice does nothing.
func (w *Weights) Free() error {
	if w.ctx == nil {
		return nil
	}
	err := catch(w.ctx.Finalize)
	w.ctx = nil
	if err != nil {
		return fmt.Errorf("nn: freeing the weights: %w", err)
	}
	return nil
}

// Bytes returns the memory held by the weights (4 bytes per float32 element, the held
// bytes of a tensor held compact).
func (w *Weights) Bytes() int64 { return w.bytes }

// Shapes returns a copy of the name -> shape map of the held tensors.
func (w *Weights) Shapes() map[string][]int {
	out := make(map[string][]int, len(w.shapes))
	for n, s := range w.shapes {
		out[n] = slices.Clone(s)
	}
	return out
}

// Root returns the Scope with an empty prefix reading these weights.
func (w *Weights) Root() Scope { return Scope{src: w} }

// param implements paramSource.
func (w *Weights) param(g *graph.Graph, name string, dims []int) *graph.Node {
	got, ok := w.shapes[name]
	if !ok {
		panic(fmt.Errorf("%w %q", ErrMissingTensor, name))
	}
	if !slices.Equal(got, dims) {
		panic(fmt.Errorf("%w: %q is %v, network expects %v", ErrShapeMismatch, name, got, dims))
	}
	v := w.ctx.GetVariableByScopeAndName(w.ctx.Scope(), name)
	if v == nil {
		panic(fmt.Errorf("%w %q (no variable)", ErrMissingTensor, name))
	}
	if h := w.held[name]; h != nil {
		return w.deltaParam(g, name, heldParam(g, name, h, v.ValueGraph(g)))
	}
	return w.deltaParam(g, name, v.ValueGraph(g))
}

// paramSource is where a Scope's Param gets its nodes: loaded Weights or a declaration.
type paramSource interface {
	param(g *graph.Graph, name string, dims []int) *graph.Node
}

// Scope is a dotted name prefix plus the source of the tensors. The zero Scope has no
// source and panics on Param. Scopes are values; In returns a new one.
type Scope struct {
	src    paramSource
	prefix string
}

// In returns the scope for a child module: s.In("down_blocks.0").In("resnets.1") reads
// "down_blocks.0.resnets.1.<name>". The name may itself contain dots.
func (s Scope) In(name string) Scope {
	return Scope{src: s.src, prefix: s.prefix + name + "."}
}

// Inf is In with a formatted name: s.Inf("resnets.%d", i).
func (s Scope) Inf(format string, args ...any) Scope { return s.In(fmt.Sprintf(format, args...)) }

// Name returns the full dotted name of a tensor in this scope.
func (s Scope) Name(name string) string { return s.prefix + name }

// Prefix returns the scope's dotted prefix ("" or ending with ".").
func (s Scope) Prefix() string { return s.prefix }

// Param returns the tensor s.Name(name) as a node of g, checking that its shape is dims.
// In a declaring scope (see Declare) it records the name and shape and returns a
// placeholder of that shape. It panics with ErrMissingTensor or ErrShapeMismatch.
func (s Scope) Param(g *graph.Graph, name string, dims ...int) *graph.Node {
	if s.src == nil {
		panic(fmt.Errorf("nn: Param(%q) on a Scope without weights", s.Name(name)))
	}
	return s.src.param(g, s.Name(name), dims)
}

// declaration records the tensors a network asks for.
type declaration struct {
	shapes map[string][]int
	nodes  map[string]*graph.Node // the placeholder of each name, reused when asked again
}

func (d *declaration) param(g *graph.Graph, name string, dims []int) *graph.Node {
	if prev, ok := d.shapes[name]; ok && !slices.Equal(prev, dims) {
		panic(fmt.Errorf("%w: %q declared as %v and as %v", ErrShapeMismatch, name, prev, dims))
	}
	if n, ok := d.nodes[name]; ok && n.Graph() == g {
		return n // a module used more than once (e.g. a shared time mixer)
	}
	d.shapes[name] = slices.Clone(dims)
	n := graph.Parameter(g, "decl:"+name, shapes.Make(dtypes.Float32, dims...))
	d.nodes[name] = n
	return n
}

// Declare runs build with a declaring Scope on a fresh graph of backend b and returns the
// tensors it asked for (name -> shape). Nothing is compiled or run; build should create
// its inputs with graph.Parameter at any small valid shape. b only builds the graph, so
// any backend works (the simplego backend is cheapest).
func Declare(b backends.Backend, build func(s Scope, g *graph.Graph) error) (map[string][]int, error) {
	d := &declaration{shapes: map[string][]int{}, nodes: map[string]*graph.Node{}}
	g := graph.NewGraph(b, "nn.Declare")
	defer g.Finalize()
	var inner error
	if err := catch(func() { sghook.Inference(g, func() { inner = build(Scope{src: d}, g) }) }); err != nil {
		return nil, fmt.Errorf("nn: declare: %w", err)
	}
	if inner != nil {
		return nil, fmt.Errorf("nn: declare: %w", inner)
	}
	return d.shapes, nil
}

// CheckTensors compares the tensors a network expects with those a checkpoint holds. It
// returns nil when both have the same names with the same shapes, and otherwise an error
// listing every difference (sorted, at most 20 shown) that matches ErrMissingTensor,
// ErrUnexpectedTensor and/or ErrShapeMismatch with errors.Is.
func CheckTensors(expected, got map[string][]int) error {
	var errs []error
	names := make([]string, 0, len(expected)+len(got))
	for n := range expected {
		names = append(names, n)
	}
	for n := range got {
		if _, ok := expected[n]; !ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		e, inE := expected[n]
		g, inG := got[n]
		switch {
		case !inG:
			errs = append(errs, fmt.Errorf("%w %q %v", ErrMissingTensor, n, e))
		case !inE:
			errs = append(errs, fmt.Errorf("%w %q %v", ErrUnexpectedTensor, n, g))
		case !slices.Equal(e, g):
			errs = append(errs, fmt.Errorf("%w: %q is %v, expected %v", ErrShapeMismatch, n, g, e))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	total := len(errs)
	if total > 20 {
		errs = append(errs[:20], fmt.Errorf("... and %d more", total-20))
	}
	return fmt.Errorf("nn: %d tensor differences: %w", total, errors.Join(errs...))
}

// CheckWeights checks that weights, less the names in ignore (buffers or tied aliases a
// state_dict may carry), hold exactly the tensors expected lists, and returns those
// weights (weights itself when ignore is empty). A nil tensor is an error naming it;
// differences are CheckTensors' error.
func CheckWeights(expected map[string][]int, weights map[string]*tensor.Dense, ignore ...string) (map[string]*tensor.Dense, error) {
	got := make(map[string][]int, len(weights))
	use := weights
	if len(ignore) > 0 {
		use = make(map[string]*tensor.Dense, len(weights))
	}
	for n, t := range weights {
		if slices.Contains(ignore, n) {
			continue
		}
		if t == nil {
			return nil, fmt.Errorf("tensor %q is nil", n)
		}
		got[n] = t.Shape
		if len(ignore) > 0 {
			use[n] = t
		}
	}
	if err := CheckTensors(expected, got); err != nil {
		return nil, err
	}
	return use, nil
}

// declareBackend is the backend DeclareShapes builds its graphs on (nothing is compiled there).
var declareBackend = sync.OnceValues(func() (backends.Backend, error) { return NewBackend("go") })

// DeclareShapes is Declare on a simplego backend created once for the process: what an
// ExpectedTensors needs to list a network's weights without compiling anything.
func DeclareShapes(build func(s Scope, g *graph.Graph) error) (map[string][]int, error) {
	b, err := declareBackend()
	if err != nil {
		return nil, err
	}
	return Declare(b, build)
}

// Float32Bytes is the memory tensors of these shapes take in float32 (4 bytes per
// element): what Weights.Bytes reports once they are loaded, known from a declaration
// alone (the planner sizes a stage's weights with it before loading anything).
func Float32Bytes(shapes map[string][]int) int64 {
	var n int64
	for _, s := range shapes {
		n += 4 * int64(tensor.NumElements(s))
	}
	return n
}
