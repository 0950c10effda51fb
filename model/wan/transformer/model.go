package transformer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"

	"github.com/vdpp/vdpp/model/checkpoint"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/tensor"
	"github.com/vdpp/vdpp/tensor/quant"
)

// ConfigFile and WeightsStem name the files of a transformer folder.
const (
	ConfigFile  = "config.json"
	WeightsStem = "diffusion_pytorch_model"
)

// ExpectedTensors lists every tensor the network reads for cfg (name -> shape), from the
// same code that builds the graph.
func ExpectedTensors(cfg Config) (map[string][]int, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	b, err := nn.NewBackend("go")
	if err != nil {
		return nil, err
	}
	p := cfg.PatchSize
	return nn.Declare(b, func(s nn.Scope, g *graph.Graph) error {
		x := graph.Parameter(g, "x", nn.F32(1, cfg.InChannels, p[0], p[1], p[2]))
		t := graph.Parameter(g, "t", nn.F32(1))
		textLen := 1
		var img *graph.Node
		if cfg.HasImage() {
			textLen = TextContextLen
			rows, n := 1, 1
			if cfg.PosEmbedSeqLen > 0 {
				rows, n = 2, cfg.PosEmbedSeqLen/2
			}
			img = graph.Parameter(g, "img", nn.F32(rows, n, cfg.ImageDim))
		}
		ehs := graph.Parameter(g, "ehs", nn.F32(1, textLen, cfg.TextDim))
		Build(s, cfg, x, t, ehs, img)
		return nil
	})
}

// IgnoredTensors are the names diffusers skips when it loads a checkpoint
// (_keys_to_ignore_on_load_unexpected: norm_added_q, which some I2V checkpoints carry).
func IgnoredTensors(cfg Config) []string {
	out := make([]string, 0, cfg.NumLayers)
	for l := range cfg.NumLayers {
		out = append(out, fmt.Sprintf("blocks.%d.attn2.norm_added_q.weight", l))
	}
	return out
}

// Model is a loaded transformer ready to run: its weights live on one backend and a
// Program compiles one graph per distinct set of input shapes. Forward is safe for
// concurrent use.
type Model struct {
	cfg     Config
	weights *nn.Weights
	prog    *nn.Program
	// rowPar is how many batch rows Forward runs at once as separate executions
	// (nn.RowParallelism); rows never interact in the network.
	rowPar int
	cpState
	cacheState
}

// ReadConfig reads and validates dir/config.json.
func ReadConfig(dir string) (Config, error) {
	path := filepath.Join(dir, ConfigFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w: %w", path, ErrConfig, err)
	}
	return ParseConfig(path, data)
}

// LoadOptions say where a transformer's weights come from.
type LoadOptions struct {
	// Variant is the folder's weights variant ("" for fp32, "fp16", "bf16").
	Variant string
	// File, when set, replaces the folder's weights: one GGUF or safetensors file, in Wan's
	// original layout (OriginalKeys: the Wan-AI and Comfy-Org releases, city96's and
	// stable-diffusion.cpp's GGUF files) or in diffusers'. The config stays the folder's.
	File string
	// Deltas (LoRAs' changes, by weight name) are merged into the weights as they are
	// copied onto the backend (nn.MergeStoredStream: dequantized, merged and held in the
	// type Hold gives them again): the model runs at no extra cost per step.
	Deltas map[string][]nn.Delta
	// Hold says the type each tensor is held in (nn.HoldFor of --weights-dtype); nil holds
	// them as stored (nn.HoldAsStored).
	Hold nn.HoldFunc
}

// keptAsStored are the weight matrices a conversion at load (--weights-dtype) leaves in their
// stored type, besides the embeddings nn.HoldAs keeps: the output head (proj_out, Wan's
// head.head), which the quantizer of city96's Wan GGUF releases (ComfyUI-GGUF's llama.cpp
// patch) never quantizes either. It is 0.01% of a 1.3B model's weights and, at q4_K, half of
// a call's error against float32 weights (its own error reaches the output unmixed).
var keptAsStored = []string{"proj_out."}

// Hold is hold with Wan's output head kept in its stored type (keptAsStored); nil stays nil
// (as stored). Every load of a Wan transformer with converted weights, and every count of
// its bytes, goes through it.
func Hold(hold nn.HoldFunc) nn.HoldFunc {
	if hold == nil {
		return nil
	}
	return func(name string, shape []int, stored quant.Type) quant.Type {
		for _, k := range keptAsStored {
			if strings.HasPrefix(name, k) {
				return nn.HoldAsStored(name, shape, stored)
			}
		}
		return hold(name, shape, stored)
	}
}

// Load reads dir/config.json and the weights of variant ("" for fp32, "fp16", "bf16"):
// diffusion_pytorch_model[.variant].safetensors, or the shards its .index.json names. It
// checks them against ExpectedTensors (the error names the file and the tensors; it matches
// checkpoint.ErrMissingTensor / ErrUnexpectedTensor / ErrShapeMismatch) and binds them to
// backend, keeping them in their stored dtype until each tensor is converted to float32 as
// it is copied onto backend (a bf16 expert never exists as a whole in float32 on the host).
func Load(dir, variant string, backend backends.Backend) (*Model, error) {
	return LoadWith(dir, LoadOptions{Variant: variant}, backend)
}

// LoadWith is Load with the weights o names.
func LoadWith(dir string, o LoadOptions, backend backends.Backend) (*Model, error) {
	cfg, err := ReadConfig(dir)
	if err != nil {
		return nil, err
	}
	if backend == nil {
		return nil, errors.New("wan/transformer: nil backend")
	}
	st, err := OpenWeights(dir, cfg, o)
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
		return nil, fmt.Errorf("wan/transformer: %w", err)
	}
	return bind(cfg, w, backend)
}

// OpenWeights opens the weights o names for a transformer of config cfg in folder dir and
// checks them against the tensors the network reads, reading no tensor data (a preflight,
// and what Load reads from).
func OpenWeights(dir string, cfg Config, o LoadOptions) (*checkpoint.Stored, error) {
	exp, err := ExpectedTensors(cfg)
	if err != nil {
		return nil, err
	}
	opts := checkpoint.LoadDirOptions{LoadOptions: checkpoint.LoadOptions{Ignore: IgnoredTensors(cfg)}}
	var st *checkpoint.Stored
	if o.File != "" {
		st, err = checkpoint.OpenSingleFile(o.File, exp, checkpoint.SingleFileOptions{LoadDirOptions: opts, Keys: &OriginalKeys})
	} else {
		stem := WeightsStem
		if o.Variant != "" {
			stem += "." + o.Variant
		}
		st, err = checkpoint.OpenDir(dir, stem, exp, opts)
	}
	if err != nil {
		return nil, fmt.Errorf("wan/transformer: %w", err)
	}
	return st, nil
}

// WithDeltas returns a model that applies deltas (a LoRA's changes, by weight name) in every
// call over m's weights, which it shares: its own compiled graphs, m's memory plus the
// deltas'. Its outputs are those of a model loaded with the deltas merged (LoadOptions.Deltas), bit
// for bit. Close it before m.
func (m *Model) WithDeltas(deltas map[string][]nn.Delta) (*Model, error) {
	v, err := m.weights.WithDeltas(deltas)
	if err != nil {
		return nil, fmt.Errorf("wan/transformer: %w", err)
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

// NewHeld is New keeping each weight in the type hold says (see LoadHeld); nil widens
// nothing, as New.
func NewHeld(cfg Config, weights map[string]*tensor.Dense, backend backends.Backend, hold nn.HoldFunc) (*Model, error) {
	if backend == nil {
		return nil, errors.New("wan/transformer: nil backend")
	}
	exp, err := ExpectedTensors(cfg)
	if err != nil {
		return nil, err
	}
	if _, err := nn.CheckWeights(exp, weights); err != nil {
		return nil, fmt.Errorf("wan/transformer: weights for %s: %w", cfg, err)
	}
	var w *nn.Weights
	if hold == nil {
		w, err = nn.NewWeights(backend, weights)
	} else {
		w, err = nn.NewWeightsHeldDense(backend, hold, weights)
	}
	if err != nil {
		return nil, fmt.Errorf("wan/transformer: %w", err)
	}
	return bind(cfg, w, backend)
}

// NewFromWeights builds a Model over weights already loaded (nn.NewWeightsHeld with
// tensors produced one at a time, e.g. random weights generated tensor by tensor), checking
// that they hold exactly the tensors ExpectedTensors(cfg) lists.
func NewFromWeights(cfg Config, w *nn.Weights) (*Model, error) {
	exp, err := ExpectedTensors(cfg)
	if err != nil {
		return nil, err
	}
	if err := nn.CheckTensors(exp, w.Shapes()); err != nil {
		return nil, fmt.Errorf("wan/transformer: weights for %s: %w", cfg, err)
	}
	return bind(cfg, w, w.Backend())
}

// Weights returns the model's weights (what they hold, in which types).
func (m *Model) Weights() *nn.Weights { return m.weights }

// bind builds the network's program over weights already on backend.
func bind(cfg Config, w *nn.Weights, backend backends.Backend) (*Model, error) {
	prog, err := nn.NewProgram(backend, w, "wan-transformer", func(s nn.Scope, in []*graph.Node) []*graph.Node {
		var img *graph.Node
		if len(in) > 3 {
			img = in[3]
		}
		return []*graph.Node{Build(s, cfg, in[0], in[1], in[2], img)}
	})
	if err != nil {
		return nil, fmt.Errorf("wan/transformer: %w", err)
	}
	return &Model{cfg: cfg, weights: w, prog: prog, rowPar: nn.RowParallelism(backend)}, nil
}

// Forward runs the network: hidden [B, in_channels, F, H, W], timestep a scalar, [1], [B]
// or [B, tokens], ehs [B, L, text_dim], image [B, S, image_dim] for a transformer with
// the image branch (nil otherwise) -> [B, out_channels, F', H', W'] (F' = F rounded down
// to a multiple of p_t, likewise H', W'). The first call for a set of shapes compiles a
// graph.
func (m *Model) Forward(hidden, timestep, ehs, image *tensor.Dense) (*tensor.Dense, error) {
	sh, err := m.checkInputs(hidden, timestep, ehs, image)
	if err != nil {
		return nil, err
	}
	b := sh.Batch
	if m.rowPar <= 1 || b == 1 || m.cfg.PosEmbedSeqLen > 0 {
		return m.forward(hidden, timestep, ehs, image)
	}
	perRow := len(timestep.Shape) >= 1 && timestep.Shape[0] == b && b > 1
	out, err := nn.RunSplit(tensor.Chunks(b, m.rowPar, 0), m.rowPar, func(start, end int) (*tensor.Dense, error) {
		ts := timestep
		if perRow {
			ts = timestep.Rows(start, end)
		}
		var img *tensor.Dense
		if image != nil {
			img = image.Rows(start, end)
		}
		return m.forward(hidden.Rows(start, end), ts, ehs.Rows(start, end), img)
	})
	if err != nil {
		return nil, fmt.Errorf("wan/transformer: forward %v: %w", hidden.Shape, err)
	}
	return out, nil
}

// checkInputs is CheckInputs on a forward's tensors (image may be nil; the others not).
func (m *Model) checkInputs(hidden, timestep, ehs, image *tensor.Dense) (Shapes, error) {
	for i, t := range []*tensor.Dense{hidden, timestep, ehs} {
		if t == nil {
			return Shapes{}, fmt.Errorf("%w: input %d is nil", ErrInput, i)
		}
	}
	var imgShape []int
	if image != nil {
		imgShape = image.Shape
	}
	return CheckInputs(m.cfg, hidden.Shape, timestep.Shape, ehs.Shape, imgShape)
}

// forward runs one execution of the network.
func (m *Model) forward(hidden, timestep, ehs, image *tensor.Dense) (*tensor.Dense, error) {
	in := []*tensor.Dense{hidden, timestep, ehs}
	if image != nil {
		in = append(in, image)
	}
	out, err := m.prog.Run(in...)
	if err != nil {
		return nil, fmt.Errorf("wan/transformer: forward %v: %w", hidden.Shape, err)
	}
	return out[0], nil
}

// Config returns the model's config.
func (m *Model) Config() Config { return m.cfg }

// WeightBytes returns the memory held by the weights (float32).
func (m *Model) WeightBytes() int64 { return m.weights.Bytes() }

// HeldBytes returns the bytes the weights hold in each weight type.
func (m *Model) HeldBytes() map[quant.Type]int64 { return m.weights.HeldBytes() }

// Close releases the compiled graphs; the Model must not be used afterwards.
func (m *Model) Close() error {
	if err := errors.Join(m.prog.Close(), m.closeCP(), m.closeCache()); err != nil {
		return fmt.Errorf("wan/transformer: close: %w", err)
	}
	return nil
}

// Release closes the model and frees its weights (nn.Weights.Free), for a process done
// with it: the weights' memory goes at the next collection even while something still
// refers to the Model. The Model must not be used afterwards.
func (m *Model) Release() error {
	if err := m.Close(); err != nil {
		return err
	}
	if err := m.weights.Free(); err != nil {
		return fmt.Errorf("wan/transformer: release: %w", err)
	}
	return nil
}
