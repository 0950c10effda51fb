package train

import (
	"fmt"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/vdpp/vdpp/data/procedural"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/tensor"
	"github.com/vdpp/vdpp/train/finetune"
)

// PhaseFineTune fine-tunes the denoiser of a model folder (Options.Model) whose family can
// (finetune.Tuner), on the procedural clips of the run's rule.
const PhaseFineTune = "finetune"

// Checkpoint metadata keys of a fine-tune.
const (
	metaModel    = "model"    // the folder fine-tuned
	metaFineTune = "finetune" // what the family says it trains
)

// fineTunePhase is a family's fine-tune task under the training loop.
type fineTunePhase struct {
	o    Options
	task finetune.Task
	c    *context.Context
	from int
}

// openFineTune resolves o.Model through the family seam and opens its fine-tune task on
// the procedural clips of o's rule and dataset seed.
func openFineTune(b backends.Backend, o Options) (finetune.Task, error) {
	m, err := family.Resolve(o.Model)
	if err != nil {
		return nil, fmt.Errorf("%w: --model: %w", ErrOptions, err)
	}
	ft, ok := m.Family.(finetune.Tuner)
	if !ok {
		return nil, fmt.Errorf("%w: --model %s: the %s family cannot be fine-tuned", ErrOptions, o.Model, m.Family.Name())
	}
	dc := procedural.ConfigFor(o.Rule)
	clips := finetune.Clips{
		Train: func(i int) *tensor.Dense {
			return procedural.ToTensor(procedural.Video(dc, o.Data, procedural.Train, i))
		},
		HeldOut: func(i int) *tensor.Dense {
			return procedural.ToTensor(procedural.Video(dc, o.Data, procedural.HeldOut, i))
		},
		TrainCount: o.Train,
	}
	return ft.FineTune(m.Dir, finetune.Options{Expert: o.Expert, Seed: o.Seed, Clips: clips, Backend: b})
}

func newFineTunePhase(b backends.Backend, o Options) (*fineTunePhase, error) {
	task, err := openFineTune(b, o)
	if err != nil {
		return nil, err
	}
	ctx, from, md, err := openContext(o, task.Weights)
	if err != nil {
		task.Close()
		return nil, err
	}
	if want, ok := md[metaFineTune]; ok && o.Resume && want != task.Describe() {
		task.Close()
		return nil, fmt.Errorf("%w: %s fine-tunes %s, not %s", ErrOptions, StatePath(o.Dir, o.Phase), want, task.Describe())
	}
	return &fineTunePhase{o: o, task: task, c: ctx, from: from}, nil
}

func (p *fineTunePhase) ctx() *context.Context { return p.c }
func (p *fineTunePhase) step() int             { return p.from }
func (p *fineTunePhase) flush() error          { return nil }
func (p *fineTunePhase) close() error          { return p.task.Close() }
func (p *fineTunePhase) meta() map[string]string {
	return map[string]string{metaModel: p.o.Model, metaFineTune: p.task.Describe()}
}
func (p *fineTunePhase) loss() lossFunc {
	return func(s nn.Scope, in []*graph.Node) []*graph.Node { return p.task.Loss(s, in) }
}
func (p *fineTunePhase) examples(k, lo, hi int) ([]*tensor.Dense, error) {
	return p.task.Examples(k, lo, hi)
}
func (p *fineTunePhase) heldOut(lo, hi int) ([]*tensor.Dense, error) { return p.task.HeldOut(lo, hi) }

// ExportFineTune writes the model folder of a fine-tune run (o.Dir's PhaseFineTune
// checkpoint) to out: the fine-tuned folder with the trained denoiser's weights (their
// moving average where the checkpoint has one, unless raw), as the family lays it out.
// o.Model, when empty, is the folder the checkpoint records.
func ExportFineTune(b backends.Backend, o Options, out string, raw bool) error {
	ctx, meta, err := loadContext(StatePath(o.Dir, PhaseFineTune))
	if err != nil {
		return err
	}
	if o.Model == "" {
		o.Model = meta[metaModel]
	}
	w, err := exportWeights(ctx, raw)
	if err != nil {
		return err
	}
	task, err := openFineTune(b, o)
	if err != nil {
		return err
	}
	defer task.Close()
	return task.Export(out, w)
}
