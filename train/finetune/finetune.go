// Package finetune is the seam between `vdpp train`'s fine-tuning phase and a model family
// whose denoiser can be fine-tuned: a family implements Tuner next to its Family (the
// train package finds it by a type assertion on the family.Family a --model value
// resolves to), and the training loop drives the Task it opens.
//
// It is a package of its own, imported only by train and by the families, because a Task
// states its loss as a GoMLX graph: the family seam (model/family), which serve's pure core
// compiles against, stays free of GoMLX (model/family's TestDeps checks it).
//
// Contract: a Task's draws are pure functions of (Options.Seed, step, example), so any
// number of data-parallel ranks give the same bits; Loss is built from the same network
// code the family's Sampler runs.
package finetune

import (
	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"

	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/tensor"
)

// Tuner is implemented by families (family.Family values) whose denoiser `vdpp train` can
// fine-tune on video clips: the family turns clips into its latents, draws the noise and
// the noise levels, and states its training loss through the same network code its Sampler
// runs. The training loop (data parallelism, the optimizer, checkpoints) is the train
// package's.
type Tuner interface {
	FineTune(dir string, o Options) (Task, error)
}

// Clips are the videos a fine-tune learns from: Train(i) and HeldOut(i) return clip i of
// the training and the held-out split as frames [F, 3, H, W] with values in [-1, 1]
// (a pure function of i). A fine-tune draws training clips from 0..TrainCount-1.
type Clips struct {
	Train, HeldOut func(i int) *tensor.Dense
	TrainCount     int
}

// Options configure a fine-tune.
type Options struct {
	// Expert picks the denoiser of a family that has several (1-based, as the family numbers
	// them); 0 is the family's choice.
	Expert int
	// Seed keys every random draw: the draws of example i of step k depend on (Seed, k, i)
	// alone.
	Seed  uint64
	Clips Clips
	// Backend runs the frozen networks (the encoder that makes latents).
	Backend backends.Backend
}

// Task is one denoiser's fine-tuning task.
type Task interface {
	// Describe says what is trained, for logs and checkpoint metadata ("transformer_2 of
	// DIR, t < 875").
	Describe() string
	// Weights are the trainable weights at the start, by their names in the model folder.
	Weights() (map[string]*tensor.Dense, error)
	// Loss builds the training loss of one microbatch from the weights read through s and
	// the inputs Examples and HeldOut return; it returns the loss (a scalar, the mean over
	// the microbatch's examples) and then any metrics.
	Loss(s nn.Scope, inputs []*graph.Node) []*graph.Node
	// Examples returns the inputs of examples [lo, hi) of training step k, each input
	// stacked along its first axis; example i's values depend on the seed, k and i only.
	Examples(k, lo, hi int) ([]*tensor.Dense, error)
	// HeldOut returns the inputs of held-out examples [lo, hi): held-out clip i with noise
	// and noise level fixed by the seed and i, the same at every call.
	HeldOut(lo, hi int) ([]*tensor.Dense, error)
	// Export writes a model folder that is the fine-tuned one's with the trained denoiser's
	// weights replaced by weights.
	Export(out string, weights map[string]*tensor.Dense) error
	Close() error
}
