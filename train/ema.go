package train

import (
	"fmt"
	"strconv"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/vdpp/vdpp/safetensors"
	"github.com/vdpp/vdpp/tensor"
)

// emaScope is the absolute context scope of the weights' exponential moving average: one
// variable per trainable model weight, under the weight's name.
const emaScope = "/ema"

// metaEMADecay is the checkpoint metadata key of the EMA decay a phase trains with.
const metaEMADecay = "ema_decay"

// emaPair is a trainable weight and its moving average.
type emaPair struct{ weight, avg *context.Variable }

// attachEMA gives every trainable root-scope variable of ctx a moving average under
// emaScope. An average restored from a checkpoint is kept; a missing one starts as a copy
// of the weight's current value (a run that turns the EMA on mid-way averages from there).
// Averages of weights that are not trained now (a VAE encoder frozen by DecoderOnly) are
// dropped: they would no longer follow the weight, and Export must write the weight itself.
func attachEMA(ctx *context.Context) ([]emaPair, error) {
	var weights []*context.Variable
	trained := map[string]bool{}
	var stale []string
	for v := range ctx.IterVariables() {
		switch {
		case v.Scope() == context.RootScope && v.Trainable:
			weights = append(weights, v)
			trained[v.Name()] = true
		case v.Scope() == emaScope:
			stale = append(stale, v.Name())
		}
	}
	for _, n := range stale {
		if trained[n] {
			continue
		}
		if err := ctx.DeleteVariable(emaScope, n); err != nil {
			return nil, fmt.Errorf("train: drop ema of frozen %s: %w", n, err)
		}
	}
	emaCtx := ctx.InAbsPath(emaScope).Checked(false)
	pairs := make([]emaPair, 0, len(weights))
	for _, w := range weights {
		avg := emaCtx.GetVariable(w.Name())
		if avg == nil {
			val, err := w.Value()
			if err != nil {
				return nil, fmt.Errorf("train: ema of %s: %w", w.Name(), err)
			}
			c, err := val.Clone()
			if err != nil {
				return nil, fmt.Errorf("train: ema of %s: %w", w.Name(), err)
			}
			avg = emaCtx.VariableWithValue(w.Name(), c)
		} else if !avg.Shape().Equal(w.Shape()) {
			return nil, fmt.Errorf("%w: ema of %s has shape %s, the weight %s", ErrCheckpoint, w.Name(), avg.Shape(), w.Shape())
		}
		avg.SetTrainable(false)
		pairs = append(pairs, emaPair{weight: w, avg: avg})
	}
	return pairs, nil
}

// dropEMA deletes the moving averages of ctx (a run resumed with the EMA turned off must
// not export averages it no longer updates).
func dropEMA(ctx *context.Context) error {
	if err := ctx.InAbsPath(emaScope).DeleteVariablesInScope(); err != nil {
		return fmt.Errorf("train: drop ema: %w", err)
	}
	return nil
}

// updateEMAGraph sets, in g, every average to decay·avg + (1-decay)·weight, reading each
// weight's value after the optimizer's update.
func updateEMAGraph(g *graph.Graph, pairs []emaPair, decay float64) {
	for _, p := range pairs {
		avg, w := p.avg.ValueGraph(g), p.weight.ValueGraph(g)
		p.avg.SetValueGraph(graph.Add(graph.MulScalar(avg, decay), graph.MulScalar(w, 1-decay)))
	}
}

// emaWeights returns the model weights of ctx with every weight that has a moving average
// replaced by it (frozen weights have none and keep their value); ok is false when ctx
// holds no averages.
func emaWeights(ctx *context.Context) (w map[string]*tensor.Dense, ok bool, err error) {
	if w, err = modelWeights(ctx); err != nil {
		return nil, false, err
	}
	for v := range ctx.IterVariables() {
		if v.Scope() != emaScope {
			continue
		}
		if _, known := w[v.Name()]; !known {
			return nil, false, fmt.Errorf("%w: ema of %s, which is not a model weight", ErrCheckpoint, v.Name())
		}
		if w[v.Name()], err = hostTensor(v); err != nil {
			return nil, false, err
		}
		ok = true
	}
	return w, ok, nil
}

// checkpointEMADecay returns the EMA decay recorded in a phase checkpoint, 0 when it has
// none.
func checkpointEMADecay(path string) (float64, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return 0, fmt.Errorf("%w: %s: %w", ErrCheckpoint, path, err)
	}
	defer f.Close()
	s, ok := f.Metadata()[metaEMADecay]
	if !ok {
		return 0, nil
	}
	d, err := strconv.ParseFloat(s, 64)
	if err != nil || !(d > 0 && d < 1) {
		return 0, fmt.Errorf("%w: %s: %s %q", ErrCheckpoint, path, metaEMADecay, s)
	}
	return d, nil
}
