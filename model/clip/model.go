package clip

import (
	"errors"
	"fmt"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"

	"github.com/vdpp/vdpp/model/checkpoint"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/tensor"
)

// Sentinel errors of the package, matched with errors.Is.
var (
	// ErrInput: pixel values of the wrong shape.
	ErrInput = errors.New("clip: bad input")
	// ErrUnsupported: a config value this implementation does not run (e.g. hidden_act).
	ErrUnsupported = errors.New("clip: unsupported config")
)

// PositionIDsBuffer is the int64 buffer older transformers versions store in CLIP state
// dicts; it is not a weight and is ignored when loading.
const PositionIDsBuffer = "vision_model.embeddings.position_ids"

// ExpectedTensors returns every weight of the CLIPVisionModelWithProjection state_dict for
// cfg (name -> shape), without the position_ids buffer.
func ExpectedTensors(cfg Config) (map[string][]int, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("clip: %w", err)
	}
	if _, err := activation(cfg.HiddenAct); err != nil {
		return nil, err
	}
	got, err := nn.DeclareShapes(func(s nn.Scope, g *graph.Graph) error {
		buildVision(s, g, nil, cfg)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("clip: %w", err)
	}
	return got, nil
}

// Model is a loaded CLIP image encoder. It is safe for concurrent use.
type Model struct {
	cfg     Config
	weights *nn.Weights
	prog    *nn.Program
}

// Load reads image_encoder/config.json and the image_encoder weights of variant ("" for
// fp32, "fp16", ...) from ck and builds the model on backend.
func Load(ck *checkpoint.Checkpoint, variant string, backend backends.Backend) (*Model, error) {
	cfg, err := ReadConfig(ck)
	if err != nil {
		return nil, fmt.Errorf("clip: %w", err)
	}
	want, err := ExpectedTensors(cfg)
	if err != nil {
		return nil, err
	}
	st, err := ck.OpenComponent(Component, variant, want, checkpoint.LoadOptions{Ignore: []string{PositionIDsBuffer}})
	if err != nil {
		return nil, fmt.Errorf("clip: %w", err)
	}
	defer st.Close()
	w, err := nn.NewWeightsStream(backend, st.Each)
	if err != nil {
		return nil, fmt.Errorf("clip: %w", err)
	}
	return bind(cfg, w, backend)
}

// New builds the model from cfg and weights named as the transformers state_dict, which
// must hold exactly ExpectedTensors(cfg) (a position_ids entry is dropped). The weights
// are copied onto backend.
func New(cfg Config, weights map[string]*tensor.Dense, backend backends.Backend) (*Model, error) {
	want, err := ExpectedTensors(cfg)
	if err != nil {
		return nil, err
	}
	use, err := nn.CheckWeights(want, weights, PositionIDsBuffer)
	if err != nil {
		return nil, fmt.Errorf("clip: %w", err)
	}
	w, err := nn.NewWeights(backend, use)
	if err != nil {
		return nil, fmt.Errorf("clip: %w", err)
	}
	return bind(cfg, w, backend)
}

// bind builds the encoder's program over weights already on backend.
func bind(cfg Config, w *nn.Weights, backend backends.Backend) (*Model, error) {
	prog, err := nn.NewProgram(backend, w, "clip.vision", func(s nn.Scope, in []*graph.Node) []*graph.Node {
		o := buildVision(s, in[0].Graph(), in[0], cfg)
		return []*graph.Node{o.imageEmbeds, o.lastHidden}
	})
	if err != nil {
		return nil, fmt.Errorf("clip: %w", err)
	}
	return &Model{cfg: cfg, weights: w, prog: prog}, nil
}

// Config returns the model's configuration.
func (m *Model) Config() Config { return m.cfg }

// WeightBytes returns the memory held by the weights (fp32).
func (m *Model) WeightBytes() int64 { return m.weights.Bytes() }

// Close releases the compiled program. The Model must not be used afterwards.
func (m *Model) Close() error {
	if m.prog == nil {
		return nil
	}
	err := m.prog.Close()
	m.prog = nil
	return err
}

// Forward runs the encoder on CLIP-normalised pixelValues [N, num_channels, S, S]
// (S = image_size) and returns image_embeds [N, projection_dim] and last_hidden_state
// [N, 1 + (S/patch_size)², hidden_size].
func (m *Model) Forward(pixelValues *tensor.Dense) (imageEmbeds, lastHidden *tensor.Dense, err error) {
	if err := checkPixels(m.cfg, pixelValues); err != nil {
		return nil, nil, err
	}
	out, err := m.prog.Run(pixelValues)
	if err != nil {
		return nil, nil, fmt.Errorf("clip: forward %v: %w", pixelValues.Shape, err)
	}
	return out[0], out[1], nil
}

// checkPixels checks pixel values against the config: the position embedding fixes the
// image size (transformers' CLIP of this vintage does not interpolate it).
func checkPixels(c Config, t *tensor.Dense) error {
	if t == nil {
		return fmt.Errorf("%w: pixel values are nil", ErrInput)
	}
	if len(t.Shape) != 4 || t.Shape[0] <= 0 || t.Shape[1] != c.NumChannels || t.Shape[2] != c.ImageSize || t.Shape[3] != c.ImageSize {
		return fmt.Errorf("%w: pixel values %v are not [N, %d, %d, %d]", ErrInput, t.Shape, c.NumChannels, c.ImageSize, c.ImageSize)
	}
	if len(t.Data) != tensor.NumElements(t.Shape) {
		return fmt.Errorf("%w: pixel values hold %d values for shape %v", ErrInput, len(t.Data), t.Shape)
	}
	return nil
}
