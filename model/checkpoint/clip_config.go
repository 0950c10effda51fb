package checkpoint

import "encoding/json"

// CLIPVisionConfig is image_encoder/config.json of a CLIPVisionModelWithProjection, with
// the transformers CLIPVisionConfig defaults for absent keys. A full CLIPConfig
// (model_type "clip") is accepted too: its vision_config is used, as transformers does.
type CLIPVisionConfig struct {
	Path string // the file it was read from

	HiddenSize        int     // default 768
	IntermediateSize  int     // default 3072
	ProjectionDim     int     // default 512
	NumHiddenLayers   int     // default 12
	NumAttentionHeads int     // default 12
	NumChannels       int     // default 3
	ImageSize         int     // default 224
	PatchSize         int     // default 32
	HiddenAct         string  // default "quick_gelu"
	LayerNormEps      float64 // default 1e-5
}

// knownActivations are the transformers ACT2FN names.
var knownActivations = map[string]bool{
	"gelu": true, "gelu_10": true, "gelu_fast": true, "gelu_new": true, "gelu_python": true,
	"gelu_pytorch_tanh": true, "gelu_accurate": true, "laplace": true, "leaky_relu": true,
	"linear": true, "mish": true, "quick_gelu": true, "relu": true, "relu2": true, "relu6": true,
	"sigmoid": true, "silu": true, "swish": true, "tanh": true,
}

// ParseCLIPVisionConfig parses and validates a CLIP vision config; path names the file in
// errors.
func ParseCLIPVisionConfig(path string, data []byte) (CLIPVisionConfig, error) {
	f, err := parseFields(path, data, ErrConfig)
	if err != nil {
		return CLIPVisionConfig{}, err
	}
	switch mt := f.str("model_type", "clip_vision_model"); mt {
	case "clip_vision_model":
	case "clip":
		var vc json.RawMessage
		if !f.decode("vision_config", &vc, "an object") {
			f.fail("vision_config", "model_type \"clip\" needs a vision_config object")
			return CLIPVisionConfig{}, f.err
		}
		if f, err = parseFields(path+" (vision_config)", vc, ErrConfig); err != nil {
			return CLIPVisionConfig{}, err
		}
	default:
		f.fail("model_type", "%q is not clip_vision_model", mt)
	}
	c := CLIPVisionConfig{
		Path:              path,
		HiddenSize:        f.int("hidden_size", 768),
		IntermediateSize:  f.int("intermediate_size", 3072),
		ProjectionDim:     f.int("projection_dim", 512),
		NumHiddenLayers:   f.int("num_hidden_layers", 12),
		NumAttentionHeads: f.int("num_attention_heads", 12),
		NumChannels:       f.int("num_channels", 3),
		ImageSize:         f.int("image_size", 224),
		PatchSize:         f.int("patch_size", 32),
		HiddenAct:         f.str("hidden_act", "quick_gelu"),
		LayerNormEps:      f.float("layer_norm_eps", 1e-5),
	}
	if f.err != nil {
		return CLIPVisionConfig{}, f.err
	}
	if err := c.Validate(); err != nil {
		return CLIPVisionConfig{}, err
	}
	return c, nil
}

// HeadDim is HiddenSize / NumAttentionHeads.
func (c CLIPVisionConfig) HeadDim() int { return c.HiddenSize / c.NumAttentionHeads }

// NumPatches is (ImageSize / PatchSize)^2.
func (c CLIPVisionConfig) NumPatches() int { g := c.ImageSize / c.PatchSize; return g * g }

// NumPositions is the token count: patches plus the class token.
func (c CLIPVisionConfig) NumPositions() int { return c.NumPatches() + 1 }

// Validate checks the sizes the vision transformer relies on. Errors name the config file.
func (c CLIPVisionConfig) Validate() error {
	k := checker{path: c.Path}
	k.check(allPositive([]int{c.HiddenSize, c.IntermediateSize, c.ProjectionDim, c.NumHiddenLayers,
		c.NumAttentionHeads, c.NumChannels, c.ImageSize, c.PatchSize}),
		"hidden_size, intermediate_size, projection_dim, num_hidden_layers, num_attention_heads, num_channels, image_size and patch_size must be positive")
	if k.err != nil {
		return k.err
	}
	k.check(c.HiddenSize%c.NumAttentionHeads == 0, "num_attention_heads %d does not divide hidden_size %d", c.NumAttentionHeads, c.HiddenSize)
	k.check(c.PatchSize <= c.ImageSize, "patch_size %d is larger than image_size %d", c.PatchSize, c.ImageSize)
	k.check(knownActivations[c.HiddenAct], "unknown hidden_act %q", c.HiddenAct)
	k.check(c.LayerNormEps > 0, "layer_norm_eps %g must be positive", c.LayerNormEps)
	return k.err
}
