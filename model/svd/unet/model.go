package unet

import (
	"errors"
	"fmt"
	"slices"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"

	"github.com/vdpp/vdpp/model/checkpoint"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/tensor"
	"github.com/vdpp/vdpp/tensor/quant"
)

// Model is a loaded UNet ready to run: its weights live on one backend and a Program
// compiles one graph per distinct set of input shapes. Forward is safe for concurrent use.
type Model struct {
	cfg     Config
	weights *nn.Weights
	prog    *nn.Program
	cpPlans cpPlans      // ForwardFrames' plans and segments
	deep    deepPrograms // DeepCache's programs (deepcache.go)
	// rowPar is how many batch rows Forward runs at once as separate executions
	// (nn.RowParallelism); each row's result does not depend on the split, because rows
	// never interact in the network.
	rowPar int
}

// Load reads ck's unet config and the weights file of variant ("" for fp32, "fp16", ...),
// checks the file against ExpectedTensors (the error names the file, the tensors and both
// shapes, and matches checkpoint.ErrMissingTensor / ErrUnexpectedTensor /
// ErrShapeMismatch), converts the weights to float32 one tensor at a time as it copies them onto backend (the
// stored dtype is kept until then, see checkpoint.Stored) and binds them.
func Load(ck *checkpoint.Checkpoint, variant string, backend backends.Backend) (*Model, error) {
	return LoadWith(ck, LoadOptions{Variant: variant}, backend)
}

// LoadOptions say where the UNet's weights come from.
type LoadOptions struct {
	// Variant is the folder's weights variant ("" for fp32, "fp16").
	Variant string
	// File, when set, replaces the folder's weights: one GGUF or safetensors file in
	// diffusers' names (DiffusersKeys). The config stays the folder's.
	File string
	// Deltas (LoRAs' changes, by weight name) are merged into the weights as they are
	// copied onto the backend (nn.MergeStoredStream: dequantized, merged and held in the
	// type Hold gives them again): the model runs at no extra cost per step.
	Deltas map[string][]nn.Delta
	// Hold says the type each tensor is held in (nn.HoldFor of --weights-dtype); nil holds
	// them as stored (nn.HoldAsStored).
	Hold nn.HoldFunc
}

// DiffusersKeys is the one layout a single UNet file is read in: diffusers' names (a
// "unet." prefix, as in a pipeline's state dict, is stripped). diffusers itself maps no
// other layout onto UNetSpatioTemporalConditionModel (its single-file loader has no entry
// for it), so Stability AI's original (generative-models) layout is not read.
var DiffusersKeys = checkpoint.KeyMap{Layout: "diffusers' layout (the only one read for SVD's UNet)", Prefixes: []string{"unet."}}

// LoadWith is Load with the weights o names.
func LoadWith(ck *checkpoint.Checkpoint, o LoadOptions, backend backends.Backend) (*Model, error) {
	cfg, err := ReadConfig(ck)
	if err != nil {
		return nil, fmt.Errorf("unet: %w", err)
	}
	if backend == nil {
		return nil, errors.New("unet: nil backend")
	}
	st, err := OpenWeights(ck, cfg, o)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	hold := o.Hold
	if hold == nil {
		hold = nn.HoldAsStored
	}
	w, err := nn.NewWeightsHeld(backend, hold, nn.MergeStoredStream(backend, hold, func(add func(string, nn.StoredTensor) error) error {
		return st.EachStored(func(name string, t checkpoint.StoredTensor) error { return add(name, nn.StoredTensor(t)) })
	}, o.Deltas))
	if err != nil {
		return nil, fmt.Errorf("unet: %w", err)
	}
	return bind(cfg, w, backend)
}

// OpenWeights opens the weights o names for a UNet of config cfg and checks them against
// the tensors the network reads, reading no tensor data.
func OpenWeights(ck *checkpoint.Checkpoint, cfg Config, o LoadOptions) (*checkpoint.Stored, error) {
	exp, err := ExpectedTensors(cfg)
	if err != nil {
		return nil, err
	}
	var st *checkpoint.Stored
	if o.File != "" {
		st, err = checkpoint.OpenSingleFile(o.File, exp, checkpoint.SingleFileOptions{Keys: &DiffusersKeys})
	} else {
		st, err = ck.OpenComponent(Component, o.Variant, exp, checkpoint.LoadOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("unet: %w", err)
	}
	return st, nil
}

// WithDeltas returns a model that applies deltas in every call over m's weights, which it
// shares (see the Wan transformer's WithDeltas): outputs bit-identical to those of a model loaded with them merged (LoadOptions.Deltas).
func (m *Model) WithDeltas(deltas map[string][]nn.Delta) (*Model, error) {
	v, err := m.weights.WithDeltas(deltas)
	if err != nil {
		return nil, fmt.Errorf("unet: %w", err)
	}
	return bind(m.cfg, v, m.weights.Backend())
}

// New builds a Model from a config and float32 weights (diffusers names), checking that
// weights holds exactly the tensors ExpectedTensors(cfg) lists (errors match
// nn.ErrMissingTensor, nn.ErrUnexpectedTensor, nn.ErrShapeMismatch). The weights are
// copied onto backend; the map may be dropped afterwards.
func New(cfg Config, weights map[string]*tensor.Dense, backend backends.Backend) (*Model, error) {
	return NewHeld(cfg, weights, backend, nil)
}

// NewHeld is New keeping each weight in the type hold says (nn.NewWeightsHeld); nil widens
// nothing, as New.
func NewHeld(cfg Config, weights map[string]*tensor.Dense, backend backends.Backend, hold nn.HoldFunc) (*Model, error) {
	if backend == nil {
		return nil, errors.New("unet: nil backend")
	}
	exp, err := ExpectedTensors(cfg)
	if err != nil {
		return nil, err
	}
	if _, err := nn.CheckWeights(exp, weights); err != nil {
		return nil, fmt.Errorf("unet: weights for %s: %w", cfg, err)
	}
	var w *nn.Weights
	if hold == nil {
		w, err = nn.NewWeights(backend, weights)
	} else {
		w, err = nn.NewWeightsHeldDense(backend, hold, weights)
	}
	if err != nil {
		return nil, fmt.Errorf("unet: %w", err)
	}
	return bind(cfg, w, backend)
}

// NewFromWeights builds a Model over weights already loaded (nn.NewWeightsHeld with
// tensors produced one at a time, e.g. random weights generated tensor by tensor, so that
// no float32 copy of the whole model exists), checking that they hold exactly the tensors
// ExpectedTensors(cfg) lists.
func NewFromWeights(cfg Config, w *nn.Weights) (*Model, error) {
	exp, err := ExpectedTensors(cfg)
	if err != nil {
		return nil, err
	}
	if err := nn.CheckTensors(exp, w.Shapes()); err != nil {
		return nil, fmt.Errorf("unet: weights for %s: %w", cfg, err)
	}
	return bind(cfg, w, w.Backend())
}

// Weights returns the model's weights (what they hold, in which types).
func (m *Model) Weights() *nn.Weights { return m.weights }

// bind builds the network's program over weights already on backend.
func bind(cfg Config, w *nn.Weights, backend backends.Backend) (*Model, error) {
	prog, err := nn.NewProgram(backend, w, "unet", func(s nn.Scope, in []*graph.Node) []*graph.Node {
		return []*graph.Node{Build(s, cfg, in[0], in[1], in[2], in[3])}
	})
	if err != nil {
		return nil, fmt.Errorf("unet: %w", err)
	}
	return &Model{cfg: cfg, weights: w, prog: prog, rowPar: nn.RowParallelism(backend)}, nil
}

// Forward runs the network: sample [B, T, Cin, h, w], timestep [B], [1] or a scalar,
// ehs [B, S, D], addedTimeIDs [B, K] -> [B, T, Cout, h, w]. The first call for a set of
// shapes compiles a graph.
func (m *Model) Forward(sample, timestep, ehs, addedTimeIDs *tensor.Dense) (*tensor.Dense, error) {
	outs, err := m.runRows(m.prog, sample, timestep, ehs, addedTimeIDs)
	if err != nil {
		return nil, err
	}
	return outs[0], nil
}

// runRows checks the inputs and runs prog on them, with perRow (one row per sample row
// each) as further inputs, as up to rowPar executions of a slice of the rows each; every
// output is joined over the rows again.
func (m *Model) runRows(prog *nn.Program, sample, timestep, ehs, addedTimeIDs *tensor.Dense, perRow ...*tensor.Dense) ([]*tensor.Dense, error) {
	for i, t := range []*tensor.Dense{sample, timestep, ehs, addedTimeIDs} {
		if t == nil {
			return nil, fmt.Errorf("%w: input %d is nil", ErrInput, i)
		}
	}
	if err := checkInputShapes(m.cfg, sample.Shape, timestep.Shape, ehs.Shape, addedTimeIDs.Shape); err != nil {
		return nil, err
	}
	b := sample.Shape[0]
	run := func(sample, timestep, ehs, ids *tensor.Dense, perRow []*tensor.Dense) ([]*tensor.Dense, error) {
		out, err := prog.Run(append([]*tensor.Dense{sample, timestep, ehs, ids}, perRow...)...)
		if err != nil {
			return nil, fmt.Errorf("unet: forward %v: %w", sample.Shape, err)
		}
		return out, nil
	}
	if m.rowPar <= 1 || b == 1 {
		return run(sample, timestep, ehs, addedTimeIDs, perRow)
	}
	perRowTimestep := len(timestep.Shape) == 1 && timestep.Shape[0] == b
	ranges := tensor.Chunks(b, m.rowPar, 0)
	rest := make([][]*tensor.Dense, len(ranges)) // outputs after the first, per range
	first, err := nn.RunSplit(ranges, m.rowPar, func(start, end int) (*tensor.Dense, error) {
		ts := timestep
		if perRowTimestep {
			ts = timestep.Rows(start, end)
		}
		extra := make([]*tensor.Dense, len(perRow))
		for i, t := range perRow {
			extra[i] = t.Rows(start, end)
		}
		out, err := run(sample.Rows(start, end), ts, ehs.Rows(start, end), addedTimeIDs.Rows(start, end), extra)
		if err != nil {
			return nil, err
		}
		rest[slices.Index(ranges, [2]int{start, end})] = out[1:]
		return out[0], nil
	})
	if err != nil {
		return nil, fmt.Errorf("unet: forward %v: %w", sample.Shape, err)
	}
	outs := []*tensor.Dense{first}
	for k := range rest[0] {
		parts := make([]*tensor.Dense, len(rest))
		for i := range rest {
			parts[i] = rest[i][k]
		}
		joined, err := tensor.ConcatRows(parts)
		if err != nil {
			return nil, fmt.Errorf("unet: forward %v: output %d: %w", sample.Shape, k+1, err)
		}
		outs = append(outs, joined)
	}
	return outs, nil
}

// Config returns the model's config.
func (m *Model) Config() Config { return m.cfg }

// WeightBytes returns the memory held by the weights (float32).
func (m *Model) WeightBytes() int64 { return m.weights.Bytes() }

// HeldBytes returns the bytes the weights hold in each weight type.
func (m *Model) HeldBytes() map[quant.Type]int64 { return m.weights.HeldBytes() }

// Backend is the backend the weights are bound to.
func (m *Model) Backend() backends.Backend { return m.prog.Backend() }

// Close releases the compiled graphs; the Model must not be used afterwards.
func (m *Model) Close() error {
	if err := errors.Join(m.prog.Close(), m.cpPlans.close(), m.deep.close()); err != nil {
		return fmt.Errorf("unet: close: %w", err)
	}
	return nil
}
