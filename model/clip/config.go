package clip

import (
	"encoding/json"

	"github.com/vdpp/vdpp/model/checkpoint"
)

// Config is image_encoder/config.json of a CLIPVisionModelWithProjection, with
// the transformers Config defaults for absent keys. A full CLIPConfig
// (model_type "clip") is accepted too: its vision_config is used, as transformers does.
type Config struct {
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

// Component is the image encoder's folder in an SVD pipeline folder (model_index.json's
// key).
const Component = "image_encoder"

// ReadConfig reads and validates the image encoder's config.json of ck.
func ReadConfig(ck *checkpoint.Checkpoint) (Config, error) {
	path, data, err := ck.ReadConfig(Component)
	if err != nil {
		return Config{}, err
	}
	return ParseConfig(path, data)
}

// knownActivations are the transformers ACT2FN names.
var knownActivations = map[string]bool{
	"gelu": true, "gelu_10": true, "gelu_fast": true, "gelu_new": true, "gelu_python": true,
	"gelu_pytorch_tanh": true, "gelu_accurate": true, "laplace": true, "leaky_relu": true,
	"linear": true, "mish": true, "quick_gelu": true, "relu": true, "relu2": true, "relu6": true,
	"sigmoid": true, "silu": true, "swish": true, "tanh": true,
}

// ParseConfig parses and validates a CLIP vision config; path names the file in
// errors.
func ParseConfig(path string, data []byte) (Config, error) {
	f, err := checkpoint.ParseFields(path, data, checkpoint.ErrConfig)
	if err != nil {
		return Config{}, err
	}
	switch mt := f.Str("model_type", "clip_vision_model"); mt {
	case "clip_vision_model":
	case "clip":
		var vc json.RawMessage
		if !f.Decode("vision_config", &vc, "an object") {
			f.Fail("vision_config", "model_type \"clip\" needs a vision_config object")
			return Config{}, f.Err()
		}
		if f, err = checkpoint.ParseFields(path+" (vision_config)", vc, checkpoint.ErrConfig); err != nil {
			return Config{}, err
		}
	default:
		f.Fail("model_type", "%q is not clip_vision_model", mt)
	}
	c := Config{
		Path:              path,
		HiddenSize:        f.Int("hidden_size", 768),
		IntermediateSize:  f.Int("intermediate_size", 3072),
		ProjectionDim:     f.Int("projection_dim", 512),
		NumHiddenLayers:   f.Int("num_hidden_layers", 12),
		NumAttentionHeads: f.Int("num_attention_heads", 12),
		NumChannels:       f.Int("num_channels", 3),
		ImageSize:         f.Int("image_size", 224),
		PatchSize:         f.Int("patch_size", 32),
		HiddenAct:         f.Str("hidden_act", "quick_gelu"),
		LayerNormEps:      f.Float("layer_norm_eps", 1e-5),
	}
	if f.Err() != nil {
		return Config{}, f.Err()
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// HeadDim is HiddenSize / NumAttentionHeads.
func (c Config) HeadDim() int { return c.HiddenSize / c.NumAttentionHeads }

// NumPatches is (ImageSize / PatchSize)^2.
func (c Config) NumPatches() int { g := c.ImageSize / c.PatchSize; return g * g }

// NumPositions is the token count: patches plus the class token.
func (c Config) NumPositions() int { return c.NumPatches() + 1 }

// ForwardBytes estimates the float32 working bytes of one forward pass on images images
// (weights not included): per image, its pixels, the largest layer's live tensors (the
// residual stream, the norm, q, k, v and the attention output with the scores and their
// softmax, or the MLP's input and two hidden activations) and the hidden states it
// returns. ForwardBytes is pure.
func (c Config) ForwardBytes(images int) int64 {
	if c.HiddenSize <= 0 || c.PatchSize <= 0 {
		return 0
	}
	tokens, d, m := int64(c.NumPositions()), int64(c.HiddenSize), int64(c.IntermediateSize)
	layer := max(6*tokens*d+2*int64(c.NumAttentionHeads)*tokens*tokens, 2*tokens*d+2*tokens*m)
	pixels := int64(c.NumChannels) * int64(c.ImageSize) * int64(c.ImageSize)
	return 4 * int64(max(images, 1)) * (pixels + layer + 2*tokens*d)
}

// Validate checks the sizes the vision transformer relies on. Errors name the config file.
func (c Config) Validate() error {
	k := checkpoint.Checker{Path: c.Path}
	k.Check(checkpoint.AllPositive([]int{c.HiddenSize, c.IntermediateSize, c.ProjectionDim, c.NumHiddenLayers,
		c.NumAttentionHeads, c.NumChannels, c.ImageSize, c.PatchSize}),
		"hidden_size, intermediate_size, projection_dim, num_hidden_layers, num_attention_heads, num_channels, image_size and patch_size must be positive")
	if k.Err() != nil {
		return k.Err()
	}
	k.Check(c.HiddenSize%c.NumAttentionHeads == 0, "num_attention_heads %d does not divide hidden_size %d", c.NumAttentionHeads, c.HiddenSize)
	k.Check(c.PatchSize <= c.ImageSize, "patch_size %d is larger than image_size %d", c.PatchSize, c.ImageSize)
	k.Check(knownActivations[c.HiddenAct], "unknown hidden_act %q", c.HiddenAct)
	k.Check(c.LayerNormEps > 0, "layer_norm_eps %g must be positive", c.LayerNormEps)
	return k.Err()
}
