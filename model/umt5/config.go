package umt5

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// Sentinel errors of the package, matched with errors.Is.
var (
	// ErrConfig: config.json is missing, malformed, or describes a network this package
	// does not run.
	ErrConfig = errors.New("umt5: bad config")
	// ErrInput: token ids or masks of the wrong shape or out of range.
	ErrInput = errors.New("umt5: bad input")
	// ErrTokenizer: the tokenizer failed or returned ids that do not fit the request.
	ErrTokenizer = errors.New("umt5: tokenizer")
)

// ConfigFile is the name of the transformers config in a text encoder folder.
const ConfigFile = "config.json"

// Config is the part of transformers' UMT5Config the encoder uses, with its defaults.
type Config struct {
	VocabSize int `json:"vocab_size"`
	DModel    int `json:"d_model"`
	DKV       int `json:"d_kv"`
	DFF       int `json:"d_ff"`
	NumLayers int `json:"num_layers"`
	NumHeads  int `json:"num_heads"`
	// RelativeAttentionNumBuckets and RelativeAttentionMaxDistance shape the position
	// buckets (half of the buckets for each direction in the encoder).
	RelativeAttentionNumBuckets  int     `json:"relative_attention_num_buckets"`
	RelativeAttentionMaxDistance int     `json:"relative_attention_max_distance"`
	LayerNormEpsilon             float64 `json:"layer_norm_epsilon"`
	// FeedForwardProj is "gated-gelu" (Wan's), "relu", "gated-silu", ...: "gated-" selects
	// the two-matrix (wi_0, wi_1) feed-forward, the rest the activation.
	FeedForwardProj string `json:"feed_forward_proj"`
	// DenseActFn and IsGatedAct are derived from FeedForwardProj as UMT5Config does
	// ("gated-gelu" means gelu_new, the tanh form).
	DenseActFn string `json:"-"`
	IsGatedAct bool   `json:"-"`
	PadTokenID int    `json:"pad_token_id"`
	EOSTokenID int    `json:"eos_token_id"`
}

// DefaultConfig returns UMT5Config's defaults (google/umt5-small's sizes).
func DefaultConfig() Config {
	return Config{
		VocabSize: 250112, DModel: 512, DKV: 64, DFF: 1024, NumLayers: 8, NumHeads: 6,
		RelativeAttentionNumBuckets: 32, RelativeAttentionMaxDistance: 128,
		LayerNormEpsilon: 1e-6, FeedForwardProj: "gated-gelu", PadTokenID: 0, EOSTokenID: 1,
	}
}

// InnerDim is num_heads·d_kv, the width of q, k and v.
func (c Config) InnerDim() int { return c.NumHeads * c.DKV }

// ParseConfig parses a transformers UMT5 config.json; path names the file in errors.
// Absent or null keys take UMT5Config's defaults; the generic names hidden_size,
// num_attention_heads, num_hidden_layers and head_dim are accepted for d_model, num_heads,
// num_layers and d_kv (UMT5Config.attribute_map). model_type must be "umt5" when present
// (T5 and mT5 have a position bias in the first layer only: another network).
func ParseConfig(path string, data []byte) (Config, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil || m == nil {
		if err == nil {
			err = errors.New("not a JSON object")
		}
		return Config{}, fmt.Errorf("%s: %w: %v", path, ErrConfig, err)
	}
	for k, v := range m { // null means "use the default", as transformers treats it
		if strings.TrimSpace(string(v)) == "null" {
			delete(m, k)
		}
	}
	// UMT5Config.attribute_map: a config may use the generic names; they set the same fields.
	for _, a := range [][2]string{{"hidden_size", "d_model"}, {"num_attention_heads", "num_heads"}, {"num_hidden_layers", "num_layers"}, {"head_dim", "d_kv"}} {
		alias, ok := m[a[0]]
		if !ok {
			continue
		}
		if v, both := m[a[1]]; both && !jsonEqual(v, alias) {
			return Config{}, fmt.Errorf("%s: %w: %s %s disagrees with %s %s", path, ErrConfig, a[0], alias, a[1], v)
		}
		m[a[1]] = alias
		delete(m, a[0])
	}
	if v, ok := m["model_type"]; ok {
		var mt string
		if json.Unmarshal(v, &mt) != nil || mt != "umt5" {
			return Config{}, fmt.Errorf("%s: %w: model_type %s is not \"umt5\"", path, ErrConfig, v)
		}
	}
	c := DefaultConfig()
	clean, _ := json.Marshal(m)
	if err := json.Unmarshal(clean, &c); err != nil {
		return Config{}, fmt.Errorf("%s: %w: %v", path, ErrConfig, err)
	}
	if err := c.derive(); err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	// Saved configs repeat the derived fields; they must agree with feed_forward_proj.
	var saved struct {
		DenseActFn *string `json:"dense_act_fn"`
		IsGatedAct *bool   `json:"is_gated_act"`
	}
	_ = json.Unmarshal(clean, &saved)
	if saved.DenseActFn != nil && *saved.DenseActFn != c.DenseActFn {
		return Config{}, fmt.Errorf("%s: %w: dense_act_fn %q disagrees with feed_forward_proj %q (%s)", path, ErrConfig, *saved.DenseActFn, c.FeedForwardProj, c.DenseActFn)
	}
	if saved.IsGatedAct != nil && *saved.IsGatedAct != c.IsGatedAct {
		return Config{}, fmt.Errorf("%s: %w: is_gated_act %v disagrees with feed_forward_proj %q", path, ErrConfig, *saved.IsGatedAct, c.FeedForwardProj)
	}
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// ReadConfig reads dir/config.json.
func ReadConfig(dir string) (Config, error) {
	path := filepath.Join(dir, ConfigFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return ParseConfig(path, data)
}

// derive sets DenseActFn and IsGatedAct from FeedForwardProj as UMT5Config.__init__ does.
func (c *Config) derive() error {
	parts := strings.Split(c.FeedForwardProj, "-")
	if (len(parts) > 1 && parts[0] != "gated") || len(parts) > 2 {
		return fmt.Errorf("%w: feed_forward_proj %q is not \"gated-ACT\" or \"ACT\"", ErrConfig, c.FeedForwardProj)
	}
	c.DenseActFn = parts[len(parts)-1]
	c.IsGatedAct = parts[0] == "gated"
	if c.FeedForwardProj == "gated-gelu" {
		c.DenseActFn = "gelu_new"
	}
	return nil
}

// Validate checks that the sizes describe a network: positive sizes, at least 4 position
// buckets (the encoder halves them per direction, then again for the exact range) and a
// max_distance past the exact range (its logarithm divides the bucket formula), a
// positive finite epsilon, a supported activation, and token ids inside the vocabulary.
func (c Config) Validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"vocab_size", c.VocabSize}, {"d_model", c.DModel}, {"d_kv", c.DKV}, {"d_ff", c.DFF}, {"num_layers", c.NumLayers}, {"num_heads", c.NumHeads}} {
		if f.v <= 0 || f.v > 1<<24 {
			return fmt.Errorf("%w: %s %d is not a positive size", ErrConfig, f.name, f.v)
		}
	}
	if c.NumHeads*c.DKV > 1<<24 {
		return fmt.Errorf("%w: num_heads·d_kv %d is too large", ErrConfig, c.NumHeads*c.DKV)
	}
	nb, md := c.RelativeAttentionNumBuckets, c.RelativeAttentionMaxDistance
	if nb < 4 || nb > 1<<16 {
		return fmt.Errorf("%w: relative_attention_num_buckets %d is not in [4, 65536]", ErrConfig, nb)
	}
	if maxExact := nb / 4; md <= maxExact || md > 1<<30 {
		return fmt.Errorf("%w: relative_attention_max_distance %d must exceed num_buckets/4 = %d", ErrConfig, md, maxExact)
	}
	if !(c.LayerNormEpsilon > 0) || math.IsInf(c.LayerNormEpsilon, 0) {
		return fmt.Errorf("%w: layer_norm_epsilon %v is not positive", ErrConfig, c.LayerNormEpsilon)
	}
	if _, err := activation(c.DenseActFn); err != nil {
		return err
	}
	if c.PadTokenID < 0 || c.PadTokenID >= c.VocabSize || c.EOSTokenID < 0 || c.EOSTokenID >= c.VocabSize {
		return fmt.Errorf("%w: pad_token_id %d / eos_token_id %d outside the vocabulary of %d", ErrConfig, c.PadTokenID, c.EOSTokenID, c.VocabSize)
	}
	return nil
}

// jsonEqual compares two JSON values by their decoded form.
func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && fmt.Sprint(x) == fmt.Sprint(y)
}
