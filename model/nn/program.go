package nn

import (
	"errors"
	"fmt"
	"slices"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/vdpp/vdpp/internal/sghook"
	"github.com/vdpp/vdpp/tensor"
)

// ErrNoInputs is returned by Program.Run when called without inputs (a graph needs at
// least one input to know its shapes).
var ErrNoInputs = errors.New("nn: program needs at least one input")

// BuildFunc builds a network's graph: s reads the weights, inputs are graph parameters
// with the shapes of Run's inputs (float32), and it returns the outputs. It is called once
// per distinct set of input shapes. It reports errors by panicking (the GoMLX convention);
// Program.Run returns them as errors.
type BuildFunc func(s Scope, inputs []*graph.Node) []*graph.Node

// Program is a compiled network for inference: a BuildFunc bound to Weights and their
// backend. Graphs are built and compiled lazily, one per distinct set of input shapes, and
// cached (without limit; a model normally sees a handful of shapes). Its graphs are
// inference graphs: the building blocks of this package emit vdpp's fused CPU ops in them
// where the backend runs those (Kernels.Fused) and take their fastest forms, which have no
// gradient on simplego. A graph whose gradient is taken is built without a Program (as
// package train builds its steps) and gets the plain, differentiable forms: nothing has to
// be marked. Program is safe for
// concurrent use: Run may be called from several goroutines; building and compiling are
// serialised, execution is not.
type Program struct {
	backend backends.Backend
	weights *Weights
	exec    *context.Exec
}

// NewProgram binds build to the weights w (nil means a network without weights) on
// backend b. When w is not nil it must live on b.
func NewProgram(b backends.Backend, w *Weights, name string, build BuildFunc) (*Program, error) {
	var ctx *context.Context
	var src paramSource
	if w != nil {
		if w.backend != b {
			return nil, fmt.Errorf("nn: program %q: weights live on another backend instance", name)
		}
		ctx, src = w.ctx, w
	} else {
		ctx, src = context.New(), noWeights{}
	}
	fn := func(_ *context.Context, inputs []*graph.Node) (outs []*graph.Node) {
		sghook.Inference(inputs[0].Graph(), func() { outs = build(Scope{src: src}, inputs) })
		return outs
	}
	exec, err := context.NewExec(b, ctx, fn)
	if err != nil {
		return nil, fmt.Errorf("nn: program %q: %w", name, err)
	}
	exec.SetMaxCache(-1)
	exec.WithName(name)
	return &Program{backend: b, weights: w, exec: exec}, nil
}

// noWeights is the paramSource of a Program without weights.
type noWeights struct{}

func (noWeights) param(_ *graph.Graph, name string, _ []int) *graph.Node {
	panic(fmt.Errorf("%w %q (program has no weights)", ErrMissingTensor, name))
}

// Backend returns the program's backend.
func (p *Program) Backend() backends.Backend { return p.backend }

// Run executes the program on inputs (float32; a nil Shape is a scalar), compiling a graph
// for their shapes on first use, and returns the outputs as new tensor.Dense values.
func (p *Program) Run(inputs ...*tensor.Dense) ([]*tensor.Dense, error) {
	if len(inputs) == 0 {
		return nil, ErrNoInputs
	}
	args := make([]any, len(inputs))
	for i, in := range inputs {
		if in == nil || len(in.Data) != tensor.NumElements(in.Shape) {
			return nil, fmt.Errorf("nn: input %d: data does not match its shape", i)
		}
		t, err := deviceTensor(p.backend, in)
		if err != nil {
			return nil, fmt.Errorf("nn: input %d: %w", i, err)
		}
		defer t.FinalizeAll()
		args[i] = t
	}
	var outs []*tensors.Tensor
	var execErr error
	if err := catch(func() { outs, execErr = p.exec.Exec(args...) }); err != nil {
		return nil, fmt.Errorf("nn: run: %w", err)
	}
	if execErr != nil {
		return nil, fmt.Errorf("nn: run: %w", execErr)
	}
	res := make([]*tensor.Dense, len(outs))
	for i, o := range outs {
		d, err := toDense(o)
		o.FinalizeAll()
		if err != nil {
			return nil, fmt.Errorf("nn: output %d: %w", i, err)
		}
		res[i] = d
	}
	return res, nil
}

// toDense copies a float32 GoMLX tensor into a new tensor.Dense.
func toDense(t *tensors.Tensor) (*tensor.Dense, error) {
	if t.DType() != dtypes.Float32 {
		return nil, fmt.Errorf("nn: output dtype %s, want float32", t.DType())
	}
	data, err := tensors.CopyFlatData[float32](t)
	if err != nil {
		return nil, err
	}
	return &tensor.Dense{Shape: slices.Clone(t.Shape().Dimensions), Data: data}, nil
}

// Close releases the compiled graphs. The Program must not be used afterwards.
func (p *Program) Close() error {
	return catch(p.exec.Finalize)
}

// F32 returns a float32 shape, a shorthand for graph building code.
func F32(dims ...int) shapes.Shape { return shapes.Make(dtypes.Float32, dims...) }

// State is a tensor kept on a Program's backend between runs, never copied to the host: the
// recurrent state of a streamed computation (a causal VAE's caches, handed from one chunk's
// run to the next). RunState consumes the States it is given (their buffers are donated to
// the run, which may reuse them as soon as they are read); Close frees one that will not be
// passed on. A State belongs to one Program's backend.
type State struct {
	t *tensors.Tensor
}

// Shape returns the state's dimensions.
func (s *State) Shape() []int { return slices.Clone(s.t.Shape().Dimensions) }

// Close frees the state's buffer. Closing a nil or closed State does nothing.
func (s *State) Close() {
	if s != nil && s.t != nil {
		s.t.FinalizeAll()
		s.t = nil
	}
}

// RunState runs the program on inputs followed by states, as Run does, and returns its
// first outputs as tensor.Dense (dense of them) and the others as States for the next run.
// The states are consumed whether the run succeeds or not: their buffers are donated to the
// run (freed as soon as the graph has read them), so a chunked computation holds one set of
// states, not the previous chunk's beside the new, and no host copies of them.
func (p *Program) RunState(dense int, inputs []*tensor.Dense, states []*State) ([]*tensor.Dense, []*State, error) {
	defer func() {
		for _, s := range states {
			s.Close()
		}
	}()
	if len(inputs)+len(states) == 0 {
		return nil, nil, ErrNoInputs
	}
	args := make([]any, 0, len(inputs)+len(states))
	for i, in := range inputs {
		if in == nil || len(in.Data) != tensor.NumElements(in.Shape) {
			return nil, nil, fmt.Errorf("nn: input %d: data does not match its shape", i)
		}
		t, err := deviceTensor(p.backend, in)
		if err != nil {
			return nil, nil, fmt.Errorf("nn: input %d: %w", i, err)
		}
		defer t.FinalizeAll()
		args = append(args, t)
	}
	for i, s := range states {
		if s == nil || s.t == nil {
			return nil, nil, fmt.Errorf("nn: state %d is closed", i)
		}
		d, err := graph.DonateTensorBuffer(s.t, p.backend, 0)
		if err != nil {
			return nil, nil, fmt.Errorf("nn: state %d: %w", i, err)
		}
		args = append(args, d)
		s.t = nil // donated: its buffer belongs to the run now
	}
	var outs []*tensors.Tensor
	var execErr error
	if err := catch(func() { outs, execErr = p.exec.Exec(args...) }); err != nil {
		return nil, nil, fmt.Errorf("nn: run: %w", err)
	}
	if execErr != nil {
		return nil, nil, fmt.Errorf("nn: run: %w", execErr)
	}
	if dense > len(outs) {
		for _, o := range outs {
			o.FinalizeAll()
		}
		return nil, nil, fmt.Errorf("nn: run: %d outputs, %d asked as tensors", len(outs), dense)
	}
	res := make([]*tensor.Dense, dense)
	for i, o := range outs[:dense] {
		d, err := toDense(o)
		o.FinalizeAll()
		if err != nil {
			for _, o := range outs[i+1:] {
				o.FinalizeAll()
			}
			return nil, nil, fmt.Errorf("nn: output %d: %w", i, err)
		}
		res[i] = d
	}
	next := make([]*State, 0, len(outs)-dense)
	for _, o := range outs[dense:] {
		next = append(next, &State{t: o})
	}
	return res, next, nil
}
