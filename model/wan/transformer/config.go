package transformer

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Sentinel errors of the package, matched with errors.Is.
var (
	// ErrConfig: config.json is malformed or describes a network this package cannot build.
	ErrConfig = errors.New("wan/transformer: bad config")
	// ErrInput: an input tensor has the wrong rank or shape.
	ErrInput = errors.New("wan/transformer: invalid input")
)

// TextContextLen is the text length diffusers' WanAttnProcessor hard-codes when a
// transformer with added k/v projections (the Wan 2.1 I2V image branch) splits its
// cross-attention context into [image tokens | text]: the text must be exactly this long.
const TextContextLen = 512

// Config is a WanTransformer3DModel config.json (diffusers v0.35), every size of the
// network. Absent keys take diffusers' defaults; 0 for ImageDim, AddedKVProjDim and
// PosEmbedSeqLen means null (no image branch, no added k/v, no image position embedding).
type Config struct {
	Path              string // the file it came from, for messages
	PatchSize         [3]int // (p_t, p_h, p_w)
	NumAttentionHeads int
	AttentionHeadDim  int
	InChannels        int
	OutChannels       int
	TextDim           int
	FreqDim           int
	FFNDim            int
	NumLayers         int
	CrossAttnNorm     bool
	QKNorm            string
	Eps               float64
	ImageDim          int
	AddedKVProjDim    int
	RopeMaxSeqLen     int
	PosEmbedSeqLen    int
}

// rawConfig mirrors config.json; pointers tell absent/null from zero.
type rawConfig struct {
	PatchSize         []int    `json:"patch_size"`
	NumAttentionHeads *int     `json:"num_attention_heads"`
	AttentionHeadDim  *int     `json:"attention_head_dim"`
	InChannels        *int     `json:"in_channels"`
	OutChannels       *int     `json:"out_channels"`
	TextDim           *int     `json:"text_dim"`
	FreqDim           *int     `json:"freq_dim"`
	FFNDim            *int     `json:"ffn_dim"`
	NumLayers         *int     `json:"num_layers"`
	CrossAttnNorm     *bool    `json:"cross_attn_norm"`
	QKNorm            *string  `json:"qk_norm"`
	Eps               *float64 `json:"eps"`
	ImageDim          *int     `json:"image_dim"`
	AddedKVProjDim    *int     `json:"added_kv_proj_dim"`
	RopeMaxSeqLen     *int     `json:"rope_max_seq_len"`
	PosEmbedSeqLen    *int     `json:"pos_embed_seq_len"`
}

func orInt(p *int, def int) int {
	if p == nil {
		return def
	}
	return *p
}

// ParseConfig parses a transformer config.json (path names it in errors) with diffusers'
// defaults for absent keys, and validates it.
func ParseConfig(path string, data []byte) (Config, error) {
	var r rawConfig
	if err := json.Unmarshal(data, &r); err != nil {
		return Config{}, fmt.Errorf("%s: %w: %v", path, ErrConfig, err)
	}
	c := Config{
		Path:              path,
		PatchSize:         [3]int{1, 2, 2},
		NumAttentionHeads: orInt(r.NumAttentionHeads, 40),
		AttentionHeadDim:  orInt(r.AttentionHeadDim, 128),
		InChannels:        orInt(r.InChannels, 16),
		OutChannels:       orInt(r.OutChannels, 16),
		TextDim:           orInt(r.TextDim, 4096),
		FreqDim:           orInt(r.FreqDim, 256),
		FFNDim:            orInt(r.FFNDim, 13824),
		NumLayers:         orInt(r.NumLayers, 40),
		CrossAttnNorm:     true,
		QKNorm:            "rms_norm_across_heads",
		Eps:               1e-6,
		ImageDim:          orInt(r.ImageDim, 0),
		AddedKVProjDim:    orInt(r.AddedKVProjDim, 0),
		RopeMaxSeqLen:     orInt(r.RopeMaxSeqLen, 1024),
		PosEmbedSeqLen:    orInt(r.PosEmbedSeqLen, 0),
	}
	if r.PatchSize != nil {
		if len(r.PatchSize) != 3 {
			return Config{}, fmt.Errorf("%s: %w: key \"patch_size\": want 3 integers, got %v", path, ErrConfig, r.PatchSize)
		}
		c.PatchSize = [3]int{r.PatchSize[0], r.PatchSize[1], r.PatchSize[2]}
	}
	if r.OutChannels != nil && *r.OutChannels == 0 {
		c.OutChannels = c.InChannels // diffusers: out_channels or in_channels
	}
	if r.CrossAttnNorm != nil {
		c.CrossAttnNorm = *r.CrossAttnNorm
	}
	if r.QKNorm != nil {
		c.QKNorm = *r.QKNorm
	}
	if r.Eps != nil {
		c.Eps = *r.Eps
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// Validate reports a config that diffusers would reject or that cannot run: non-positive
// sizes, an odd head dim (the rotary tables need even axis sizes), and an image branch
// whose parts do not fit together: image_dim and added_kv_proj_dim come together, and the
// added k/v projections read the image embedder's output, so their width is the inner dim.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: %w: %s", c.Path, ErrConfig, fmt.Sprintf(format, args...))
	}
	for i, p := range c.PatchSize {
		if p <= 0 {
			return bad("patch_size[%d] = %d, want > 0", i, p)
		}
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"num_attention_heads", c.NumAttentionHeads}, {"attention_head_dim", c.AttentionHeadDim},
		{"in_channels", c.InChannels}, {"out_channels", c.OutChannels}, {"text_dim", c.TextDim},
		{"freq_dim", c.FreqDim}, {"ffn_dim", c.FFNDim}, {"num_layers", c.NumLayers},
		{"rope_max_seq_len", c.RopeMaxSeqLen}} {
		if f.v <= 0 {
			return bad("%s = %d, want > 0", f.name, f.v)
		}
	}
	if c.AttentionHeadDim%2 != 0 {
		return bad("attention_head_dim %d is odd (the rotary embedding rotates pairs)", c.AttentionHeadDim)
	}
	if c.FreqDim%2 != 0 {
		return bad("freq_dim %d is odd", c.FreqDim)
	}
	if c.Eps <= 0 {
		return bad("eps %g, want > 0", c.Eps)
	}
	if c.ImageDim < 0 || c.AddedKVProjDim < 0 || c.PosEmbedSeqLen < 0 {
		return bad("negative image_dim, added_kv_proj_dim or pos_embed_seq_len")
	}
	if c.ImageDim > 0 && c.AddedKVProjDim == 0 {
		return bad("image_dim %d without added_kv_proj_dim: the image embeddings would have no attention to enter", c.ImageDim)
	}
	if c.AddedKVProjDim > 0 && c.ImageDim > 0 && c.AddedKVProjDim != c.InnerDim() {
		return bad("added_kv_proj_dim %d differs from the inner dim %d that the image embedder outputs", c.AddedKVProjDim, c.InnerDim())
	}
	if c.AddedKVProjDim > 0 && c.ImageDim == 0 {
		return bad("added_kv_proj_dim %d without image_dim: diffusers would split the text context as if it held image tokens", c.AddedKVProjDim)
	}
	if c.PosEmbedSeqLen > 0 && c.ImageDim == 0 {
		return bad("pos_embed_seq_len %d without image_dim", c.PosEmbedSeqLen)
	}
	return nil
}

// InnerDim is heads × head dim, the width of the token stream.
func (c Config) InnerDim() int { return c.NumAttentionHeads * c.AttentionHeadDim }

// HasImage reports whether the network takes image embeddings (the Wan 2.1 I2V branch).
func (c Config) HasImage() bool { return c.ImageDim > 0 }

// PatchVolume is p_t·p_h·p_w.
func (c Config) PatchVolume() int { return c.PatchSize[0] * c.PatchSize[1] * c.PatchSize[2] }

// String summarises the config for messages.
func (c Config) String() string {
	s := fmt.Sprintf("wan transformer %d layers, %d heads x %d, patch %v, in %d, out %d, text %d, ffn %d",
		c.NumLayers, c.NumAttentionHeads, c.AttentionHeadDim, c.PatchSize, c.InChannels, c.OutChannels, c.TextDim, c.FFNDim)
	if c.HasImage() {
		s += fmt.Sprintf(", image %d", c.ImageDim)
	}
	return s
}
