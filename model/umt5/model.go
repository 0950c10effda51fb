package umt5

import (
	"errors"
	"fmt"
	"maps"
	"sync"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"

	"github.com/vdpp/vdpp/model/checkpoint"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/tensor"
)

// WeightsStem is the weights file stem of a transformers folder: model.safetensors, or
// model.safetensors.index.json with its model-0000N-of-0000M.safetensors shards.
const WeightsStem = "model"

// SharedEmbedding is the token embedding table [vocab_size, d_model].
const SharedEmbedding = "shared.weight"

// TiedEmbedding is the encoder's alias of shared.weight. save_pretrained leaves it out;
// a file that has it anyway holds the same tensor, which Load ignores. A file that has
// only the alias is read from it.
const TiedEmbedding = "encoder.embed_tokens.weight"

// declareBackend is the backend graphs are declared on (nothing is compiled there).
var declareBackend = sync.OnceValues(func() (backends.Backend, error) { return nn.NewBackend("go") })

// ExpectedTensors returns every weight of the UMT5EncoderModel state_dict for cfg
// (name -> shape), without the tied encoder.embed_tokens.weight.
func ExpectedTensors(cfg Config) (map[string][]int, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	b, err := declareBackend()
	if err != nil {
		return nil, fmt.Errorf("umt5: %w", err)
	}
	got, err := nn.Declare(b, func(s nn.Scope, g *graph.Graph) error {
		buildEncoder(s, g, nil, nil, cfg)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("umt5: %w", err)
	}
	return got, nil
}

// LoadOptions tunes Load.
type LoadOptions struct {
	// Progress, when not nil, is called after every tensor read with the bytes read so
	// far and the total (as stored: bf16 weights count 2 bytes each).
	Progress func(loaded, total int64)
}

// Model is a loaded UMT5 text encoder. It is safe for concurrent use.
type Model struct {
	cfg     Config
	weights *nn.Weights
	prog    *nn.Program
}

// Load reads a transformers UMT5EncoderModel folder (Wan's text_encoder/): config.json
// and model.safetensors or a sharded model.safetensors.index.json, with fp32, bf16 or fp16
// weights (converted to float32), and builds the model on backend.
func Load(dir string, backend backends.Backend, opts LoadOptions) (*Model, error) {
	cfg, err := ReadConfig(dir)
	if err != nil {
		return nil, err
	}
	want, err := ExpectedTensors(cfg)
	if err != nil {
		return nil, err
	}
	ts, err := checkpoint.LoadDir(dir, WeightsStem, want, checkpoint.LoadDirOptions{
		LoadOptions: checkpoint.LoadOptions{Ignore: []string{TiedEmbedding}},
		Progress:    opts.Progress,
	})
	if onlyMissing(err, SharedEmbedding) {
		// The embedding saved under its encoder alias only: read it from there.
		alt := maps.Clone(want)
		delete(alt, SharedEmbedding)
		alt[TiedEmbedding] = want[SharedEmbedding]
		if ts2, err2 := checkpoint.LoadDir(dir, WeightsStem, alt, checkpoint.LoadDirOptions{Progress: opts.Progress}); err2 == nil {
			ts, err = ts2, nil
			ts[SharedEmbedding] = ts[TiedEmbedding]
			delete(ts, TiedEmbedding)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("umt5: %w", err)
	}
	return New(cfg, ts, backend)
}

// onlyMissing reports whether err is a load error whose one problem is that name is missing.
func onlyMissing(err error, name string) bool {
	var le *checkpoint.LoadError
	return errors.As(err, &le) && len(le.Problems) == 1 && le.Problems[0].Kind == checkpoint.Missing && le.Problems[0].Name == name
}

// New builds the model from cfg and weights named as the transformers state_dict, which
// must hold exactly ExpectedTensors(cfg) (a tied encoder.embed_tokens.weight is dropped).
// The weights are copied onto backend.
func New(cfg Config, weights map[string]*tensor.Dense, backend backends.Backend) (*Model, error) {
	want, err := ExpectedTensors(cfg)
	if err != nil {
		return nil, err
	}
	got := make(map[string][]int, len(weights))
	use := make(map[string]*tensor.Dense, len(weights))
	for n, t := range weights {
		if n == TiedEmbedding {
			continue
		}
		if t == nil {
			return nil, fmt.Errorf("umt5: tensor %q is nil", n)
		}
		got[n], use[n] = t.Shape, t
	}
	if err := nn.CheckTensors(want, got); err != nil {
		return nil, fmt.Errorf("umt5: %w", err)
	}
	w, err := nn.NewWeights(backend, use)
	if err != nil {
		return nil, fmt.Errorf("umt5: %w", err)
	}
	prog, err := nn.NewProgram(backend, w, "umt5.encoder", func(s nn.Scope, in []*graph.Node) []*graph.Node {
		return []*graph.Node{buildEncoder(s, in[0].Graph(), in[0], in[1], cfg)}
	})
	if err != nil {
		return nil, fmt.Errorf("umt5: %w", err)
	}
	return &Model{cfg: cfg, weights: w, prog: prog}, nil
}

// Config returns the model's configuration.
func (m *Model) Config() Config { return m.cfg }

// WeightBytes returns the memory held by the weights (fp32).
func (m *Model) WeightBytes() int64 { return m.weights.Bytes() }

// Close releases the compiled programs. The Model must not be used afterwards.
func (m *Model) Close() error {
	if m.prog == nil {
		return nil
	}
	err := m.prog.Close()
	m.prog = nil
	return err
}

// Forward runs the encoder on token ids [B][L] with attention mask [B][L] (1 for a real
// token, 0 for padding; nil means all ones) and returns last_hidden_state [B, L, d_model],
// as UMT5EncoderModel(input_ids, attention_mask) does in fp32. Every row must have the
// same length L ≥ 1 and ids must lie in [0, vocab_size).
func (m *Model) Forward(ids, mask [][]int32) (*tensor.Dense, error) {
	idT, maskT, err := m.inputs(ids, mask)
	if err != nil {
		return nil, err
	}
	out, err := m.prog.Run(idT, maskT)
	if err != nil {
		return nil, fmt.Errorf("umt5: forward %v: %w", idT.Shape, err)
	}
	return out[0], nil
}

// inputs checks ids and mask and packs them as float32 tensors (exact: ids < 2²⁴).
func (m *Model) inputs(ids, mask [][]int32) (*tensor.Dense, *tensor.Dense, error) {
	b := len(ids)
	if b == 0 || len(ids[0]) == 0 {
		return nil, nil, fmt.Errorf("%w: no token ids", ErrInput)
	}
	l := len(ids[0])
	if mask != nil && len(mask) != b {
		return nil, nil, fmt.Errorf("%w: %d mask rows for %d id rows", ErrInput, len(mask), b)
	}
	idT, maskT := tensor.New(b, l), tensor.New(b, l)
	for i, row := range ids {
		if len(row) != l {
			return nil, nil, fmt.Errorf("%w: id row %d has %d tokens, row 0 has %d", ErrInput, i, len(row), l)
		}
		if mask != nil && len(mask[i]) != l {
			return nil, nil, fmt.Errorf("%w: mask row %d has %d entries for %d tokens", ErrInput, i, len(mask[i]), l)
		}
		for j, id := range row {
			if id < 0 || int(id) >= m.cfg.VocabSize {
				return nil, nil, fmt.Errorf("%w: token id %d at [%d][%d] outside the vocabulary of %d", ErrInput, id, i, j, m.cfg.VocabSize)
			}
			idT.Data[i*l+j] = float32(id)
			mv := int32(1)
			if mask != nil {
				mv = mask[i][j]
			}
			if mv != 0 && mv != 1 {
				return nil, nil, fmt.Errorf("%w: mask value %d at [%d][%d] is not 0 or 1", ErrInput, mv, i, j)
			}
			maskT.Data[i*l+j] = float32(mv)
		}
	}
	return idT, maskT, nil
}
