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

// stepper runs one optimisation step (forward, gradient, Adam update) per call on the
// variables of ctx.
type stepper struct {
	backend backends.Backend
	ctx     *context.Context
	exec    *context.Exec
	lr      *context.Variable
}

// newStepper compiles (lazily, on the first Step) the training step of loss with Adam at
// learning rate lr. Setting lr also overwrites a learning rate restored from a checkpoint.
// With emaDecay in (0, 1) each step also updates a moving average of the trainable weights
// (see attachEMA); otherwise any averages in ctx are dropped.
func newStepper(b backends.Backend, ctx *context.Context, lr, emaDecay float64, loss lossFunc) (*stepper, error) {
	opt := optimizers.Adam().LearningRate(lr).Done()
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
	fn := func(ctx *context.Context, inputs []*graph.Node) []*graph.Node {
		g := inputs[0].Graph()
		nn.MarkTraining(g)
		outs := loss(nn.ContextScope(ctx), inputs)
		opt.UpdateGraph(ctx, g, outs[0])
		updateEMAGraph(g, pairs, emaDecay)
		return outs
	}
	exec, err := context.NewExec(b, ctx, fn)
	if err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	return &stepper{backend: b, ctx: ctx, exec: exec, lr: lrVar}, nil
}

// SetLR sets the learning rate of the following steps (it is saved with the checkpoint).
func (s *stepper) SetLR(lr float64) error {
	if err := s.lr.SetValue(tensors.FromScalar(float32(lr))); err != nil {
		return fmt.Errorf("train: learning rate: %w", err)
	}
	return nil
}

// Step runs one step on inputs and returns the loss and metrics.
func (s *stepper) Step(inputs ...*tensor.Dense) (vals []float64, err error) {
	args := make([]any, len(inputs))
	for i, in := range inputs {
		args[i] = tensors.FromFlatDataAndDimensions(in.Data, in.Shape...)
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("train: step: %v", r)
		}
	}()
	outs, err := s.exec.Exec(args...)
	if err != nil {
		return nil, fmt.Errorf("train: step: %w", err)
	}
	for _, o := range outs {
		v, err := tensors.CopyFlatData[float32](o)
		if err != nil {
			return nil, err
		}
		vals = append(vals, float64(v[0]))
		o.FinalizeAll()
	}
	return vals, nil
}
