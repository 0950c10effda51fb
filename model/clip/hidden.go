package clip

import (
	"fmt"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"

	"github.com/vdpp/vdpp/model/checkpoint"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/tensor"
)

// HiddenModel is transformers' CLIPVisionModel run to one of its hidden states,
// hidden_states[Layers()] of output_hidden_states=True: index 0 is the embeddings after
// pre_layrnorm, index i the output of encoder layer i−1; no post_layernorm, no projection.
// Wan 2.1's image-to-video pipeline takes hidden_states[-2], the penultimate layer's output.
// It is safe for concurrent use.
type HiddenModel struct {
	cfg     Config
	layers  int
	weights *nn.Weights
	prog    *nn.Program
}

// HiddenLayers turns a hidden_states index (negative counts from the end, as Python does:
// −1 is the last layer's output, −2 the penultimate) into the number of encoder layers
// that run; an index outside [−(L+1), L] is an error naming the config.
func (c Config) HiddenLayers(index int) (int, error) {
	n := c.NumHiddenLayers
	layers := index
	if index < 0 {
		layers = n + 1 + index
	}
	if layers < 0 || layers > n {
		return 0, fmt.Errorf("%s: %w: hidden_states[%d] does not exist with num_hidden_layers %d", c.Path, checkpoint.ErrConfig, index, n)
	}
	return layers, nil
}

// HiddenTensors lists the tensors a HiddenModel of layers encoder layers reads (name ->
// shape): the embeddings, pre_layrnorm and those layers.
func HiddenTensors(cfg Config, layers int) (map[string][]int, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("clip: %w", err)
	}
	if _, err := activation(cfg.HiddenAct); err != nil {
		return nil, err
	}
	got, err := nn.DeclareShapes(func(s nn.Scope, g *graph.Graph) error {
		buildHidden(s.In("vision_model"), g, nil, cfg, layers)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("clip: %w", err)
	}
	return got, nil
}

// unusedTensors are the names of a CLIPVisionModel (or ...WithProjection) state dict that
// a HiddenModel of layers layers does not read: the later layers, post_layernorm, the
// projection and the position_ids buffer. They may be in the file and are not loaded.
func unusedTensors(cfg Config, layers int) []string {
	out := []string{PositionIDsBuffer, "vision_model.post_layernorm.weight", "vision_model.post_layernorm.bias", "visual_projection.weight"}
	for i := layers; i < cfg.NumHiddenLayers; i++ {
		for _, n := range []string{"layer_norm1", "layer_norm2", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
			"self_attn.out_proj", "mlp.fc1", "mlp.fc2"} {
			out = append(out, fmt.Sprintf("vision_model.encoder.layers.%d.%s.weight", i, n), fmt.Sprintf("vision_model.encoder.layers.%d.%s.bias", i, n))
		}
	}
	return out
}

// LoadHidden reads the image encoder of ck (image_encoder/config.json and its weights of
// variant) as a CLIPVisionModel computing hidden_states[index] (index as Config.HiddenLayers
// takes it) on backend. The tensors it does not read (later layers, post_layernorm, a
// projection) may be in the file and are skipped.
func LoadHidden(ck *checkpoint.Checkpoint, variant string, backend backends.Backend, index int) (*HiddenModel, error) {
	cfg, err := ReadConfig(ck)
	if err != nil {
		return nil, fmt.Errorf("clip: %w", err)
	}
	layers, err := cfg.HiddenLayers(index)
	if err != nil {
		return nil, err
	}
	want, err := HiddenTensors(cfg, layers)
	if err != nil {
		return nil, err
	}
	st, err := ck.OpenComponent(Component, variant, want, checkpoint.LoadOptions{Ignore: unusedTensors(cfg, layers)})
	if err != nil {
		return nil, fmt.Errorf("clip: %w", err)
	}
	defer st.Close()
	w, err := nn.NewWeightsStream(backend, st.Each)
	if err != nil {
		return nil, fmt.Errorf("clip: %w", err)
	}
	return bindHidden(cfg, layers, w, backend)
}

// NewHidden builds a HiddenModel of layers encoder layers from cfg and weights named as the
// transformers state dict, which must hold HiddenTensors(cfg, layers) (the tensors it does
// not read are dropped).
func NewHidden(cfg Config, layers int, weights map[string]*tensor.Dense, backend backends.Backend) (*HiddenModel, error) {
	want, err := HiddenTensors(cfg, layers)
	if err != nil {
		return nil, err
	}
	use, err := nn.CheckWeights(want, weights, unusedTensors(cfg, layers)...)
	if err != nil {
		return nil, fmt.Errorf("clip: %w", err)
	}
	w, err := nn.NewWeights(backend, use)
	if err != nil {
		return nil, fmt.Errorf("clip: %w", err)
	}
	return bindHidden(cfg, layers, w, backend)
}

func bindHidden(cfg Config, layers int, w *nn.Weights, backend backends.Backend) (*HiddenModel, error) {
	prog, err := nn.NewProgram(backend, w, "clip.hidden", func(s nn.Scope, in []*graph.Node) []*graph.Node {
		return []*graph.Node{buildHidden(s.In("vision_model"), in[0].Graph(), in[0], cfg, layers)}
	})
	if err != nil {
		return nil, fmt.Errorf("clip: %w", err)
	}
	return &HiddenModel{cfg: cfg, layers: layers, weights: w, prog: prog}, nil
}

// Config returns the encoder's configuration.
func (m *HiddenModel) Config() Config { return m.cfg }

// Layers is how many encoder layers run (the hidden_states index computed).
func (m *HiddenModel) Layers() int { return m.layers }

// WeightBytes returns the memory held by the weights (fp32).
func (m *HiddenModel) WeightBytes() int64 { return m.weights.Bytes() }

// Forward runs the encoder on CLIP-normalised pixel values [N, num_channels, S, S] and
// returns the hidden state [N, 1 + (S/patch_size)², hidden_size].
func (m *HiddenModel) Forward(pixelValues *tensor.Dense) (*tensor.Dense, error) {
	if err := checkPixels(m.cfg, pixelValues); err != nil {
		return nil, err
	}
	out, err := m.prog.Run(pixelValues)
	if err != nil {
		return nil, fmt.Errorf("clip: forward %v: %w", pixelValues.Shape, err)
	}
	return out[0], nil
}

// Close releases the compiled program. The model must not be used afterwards.
func (m *HiddenModel) Close() error {
	if m.prog == nil {
		return nil
	}
	err := m.prog.Close()
	m.prog = nil
	return err
}
