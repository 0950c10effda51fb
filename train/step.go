package train

import (
	"fmt"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/train/optimizers"

	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/tensor"
)

// lossFunc builds a training loss from the model scope and the step's inputs; it returns
// the loss to minimise followed by any metrics to report.
type lossFunc func(s nn.Scope, inputs []*graph.Node) []*graph.Node

// gradientApplier is an optimizer that updates the variables from given gradients (GoMLX's
// Adam is one).
type gradientApplier interface {
	UpdateGraphWithGradients(ctx *context.Context, grads []*graph.Node, lossDType dtypes.DType)
}

// stepper runs the two halves of an optimisation step on the variables of ctx: Grad (the
// forward pass and the gradient of one microbatch, no variable changes) and Apply (Adam and
// the EMA, given a gradient). Between them the data-parallel loop sums the gradients of
// every microbatch of the step, on every rank, in one fixed order (sumTree).
//
// A gradient travels as one flat vector: every trainable variable's gradient, flattened, in
// the context's variable order, followed by the loss and the metrics (so they are summed
// alongside, in the same order).
type stepper struct {
	backend backends.Backend
	ctx     *context.Context
	grad    *context.Exec
	apply   *context.Exec
	eval    *context.Exec
	lr      *context.Variable

	vars    []*context.Variable // trainable variables the loss reads, in context order
	params  int                 // total elements of vars
	metrics int                 // loss + metrics count
}

// newStepper compiles (lazily, on first use) the training step of loss with Adam at
// learning rate lr. Setting lr also overwrites a learning rate restored from a checkpoint.
// With emaDecay in (0, 1) each Apply also updates a moving average of the trainable weights
// (see attachEMA); otherwise any averages in ctx are dropped.
func newStepper(b backends.Backend, ctx *context.Context, lr, emaDecay float64, loss lossFunc) (*stepper, error) {
	opt, ok := optimizers.Adam().LearningRate(lr).Done().(gradientApplier)
	if !ok {
		return nil, fmt.Errorf("train: GoMLX's Adam cannot apply given gradients")
	}
	lrVar := optimizers.LearningRateVarWithValue(ctx, dtypes.Float32, lr)
	if err := lrVar.SetValue(tensors.FromScalar(float32(lr))); err != nil {
		return nil, fmt.Errorf("train: learning rate: %w", err)
	}
	var pairs []emaPair
	if emaDecay > 0 {
		var err error
		if pairs, err = attachEMA(ctx); err != nil {
			return nil, err
		}
	} else if err := dropEMA(ctx); err != nil {
		return nil, err
	}
	s := &stepper{backend: b, ctx: ctx, lr: lrVar}
	gradFn := func(ctx *context.Context, inputs []*graph.Node) *graph.Node {
		g := inputs[0].Graph()
		outs := loss(nn.ContextScope(ctx), inputs)
		grads := ctx.BuildTrainableVariablesGradientsGraph(outs[0])
		var used []*context.Variable
		for v := range ctx.IterVariables() {
			if v.Trainable && v.InUseByGraph(g) {
				used = append(used, v)
			}
		}
		if len(used) != len(grads) {
			panic(fmt.Errorf("train: %d gradients for %d trainable variables", len(grads), len(used)))
		}
		s.vars, s.params, s.metrics = used, 0, len(outs)
		flat := make([]*graph.Node, 0, len(grads)+len(outs))
		for i, gr := range grads {
			s.params += used[i].Shape().Size()
			flat = append(flat, graph.Reshape(gr, -1))
		}
		for _, o := range outs {
			flat = append(flat, graph.Reshape(graph.ConvertDType(o, dtypes.Float32), 1))
		}
		return graph.Concatenate(flat, 0)
	}
	applyFn := func(ctx *context.Context, flat *graph.Node) *graph.Node {
		g := flat.Graph()
		grads := make([]*graph.Node, len(s.vars))
		at := 0
		for i, v := range s.vars {
			v.ValueGraph(g) // the optimizer updates the variables this graph reads
			n := v.Shape().Size()
			grads[i] = graph.Reshape(graph.Slice(flat, graph.AxisRange(at, at+n)), v.Shape().Dimensions...)
			at += n
		}
		opt.UpdateGraphWithGradients(ctx, grads, dtypes.Float32)
		updateEMAGraph(g, pairs, emaDecay)
		return lrVar.ValueGraph(g)
	}
	evalFn := func(ctx *context.Context, inputs []*graph.Node) []*graph.Node {
		return loss(nn.ContextScope(ctx), inputs)
	}
	var err error
	if s.grad, err = context.NewExec(b, ctx, gradFn); err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	if s.apply, err = context.NewExec(b, ctx, applyFn); err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	if s.eval, err = context.NewExec(b, ctx, evalFn); err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	return s, nil
}

// SetLR sets the learning rate of the following steps (it is saved with the checkpoint).
func (s *stepper) SetLR(lr float64) error {
	if err := s.lr.SetValue(tensors.FromScalar(float32(lr))); err != nil {
		return fmt.Errorf("train: learning rate: %w", err)
	}
	return nil
}

// Grad returns the flat gradient of one microbatch (see stepper): len(vars) gradients
// flattened, then the loss and the metrics. The variables are not changed.
func (s *stepper) Grad(inputs ...*tensor.Dense) (flat []float32, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("train: gradient: %v", r)
		}
	}()
	outs, err := s.grad.Exec(hostArgs(inputs)...)
	if err != nil {
		return nil, fmt.Errorf("train: gradient: %w", err)
	}
	defer outs[0].FinalizeAll()
	return tensors.CopyFlatData[float32](outs[0])
}

// Apply runs Adam (and the EMA) with a gradient laid out as Grad's, without its tail.
func (s *stepper) Apply(grad []float32) (err error) {
	if len(grad) != s.params {
		return fmt.Errorf("train: apply: a gradient of %d values for %d parameters", len(grad), s.params)
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("train: apply: %v", r)
		}
	}()
	outs, err := s.apply.Exec(tensors.FromFlatDataAndDimensions(grad, len(grad)))
	if err != nil {
		return fmt.Errorf("train: apply: %w", err)
	}
	for _, o := range outs {
		o.FinalizeAll()
	}
	return nil
}

// Eval returns the loss and the metrics of inputs without a gradient (held-out loss).
func (s *stepper) Eval(inputs ...*tensor.Dense) (vals []float64, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("train: eval: %v", r)
		}
	}()
	outs, err := s.eval.Exec(hostArgs(inputs)...)
	if err != nil {
		return nil, fmt.Errorf("train: eval: %w", err)
	}
	for _, o := range outs {
		v, err := tensors.CopyFlatData[float32](o)
		o.FinalizeAll()
		if err != nil {
			return nil, err
		}
		vals = append(vals, float64(v[0]))
	}
	return vals, nil
}

// Step runs a whole step on one microbatch (Grad, then Apply) and returns the loss and the
// metrics.
func (s *stepper) Step(inputs ...*tensor.Dense) ([]float64, error) {
	flat, err := s.Grad(inputs...)
	if err != nil {
		return nil, err
	}
	if err := s.Apply(flat[:s.params]); err != nil {
		return nil, err
	}
	vals := make([]float64, 0, s.metrics)
	for _, v := range flat[s.params:] {
		vals = append(vals, float64(v))
	}
	return vals, nil
}

func hostArgs(inputs []*tensor.Dense) []any {
	args := make([]any, len(inputs))
	for i, in := range inputs {
		args[i] = tensors.FromFlatDataAndDimensions(in.Data, in.Shape...)
	}
	return args
}
