package checkpoint

import (
	"encoding/json"
	"fmt"
)

// UNet block type names (diffusers).
const (
	CrossAttnDownBlockSpatioTemporal = "CrossAttnDownBlockSpatioTemporal"
	DownBlockSpatioTemporal          = "DownBlockSpatioTemporal"
	CrossAttnUpBlockSpatioTemporal   = "CrossAttnUpBlockSpatioTemporal"
	UpBlockSpatioTemporal            = "UpBlockSpatioTemporal"
)

// UNetClassName is the diffusers class of the SVD denoiser.
const UNetClassName = "UNetSpatioTemporalConditionModel"

// GroupNormGroups is the group count of every GroupNorm in the SVD UNet and VAE (fixed in
// diffusers, not a config key).
const GroupNormGroups = 32

// UNetConfig is unet/config.json of a UNetSpatioTemporalConditionModel, with diffusers'
// constructor defaults for absent keys and the int-or-list fields expanded per down block
// (index i of a per-block slice is down block i; up block j uses index NumBlocks()-1-j).
type UNetConfig struct {
	Path string // the file it was read from

	// SampleSize is nil when absent or null, [s] for an int, [h, w] for a pair.
	SampleSize                        []int
	InChannels                        int      // default 8
	OutChannels                       int      // default 4
	DownBlockTypes                    []string // default 3x CrossAttnDown + DownBlock
	UpBlockTypes                      []string // default UpBlock + 3x CrossAttnUp
	BlockOutChannels                  []int    // default (320, 640, 1280, 1280)
	AdditionTimeEmbedDim              int      // default 256
	ProjectionClassEmbeddingsInputDim int      // default 768
	LayersPerBlock                    []int    // per down block; default 2
	CrossAttentionDim                 []int    // per down block; default 1024
	NumAttentionHeads                 []int    // per down block; default (5, 10, 20, 20)
	// TransformerLayersPerBlock holds, per down block, either one count (every layer of
	// the block, the usual int form) or one count per layer; see TransformerLayers.
	TransformerLayersPerBlock [][]int // default 1
	NumFrames                 int     // default 25
}

// ParseUNetConfig parses and validates a UNet config; path names the file in errors.
func ParseUNetConfig(path string, data []byte) (UNetConfig, error) {
	f, err := parseFields(path, data, ErrConfig)
	if err != nil {
		return UNetConfig{}, err
	}
	if cls := f.str("_class_name", UNetClassName); cls != UNetClassName {
		f.fail("_class_name", "%q is not %s", cls, UNetClassName)
	}
	c := UNetConfig{Path: path}
	c.SampleSize = f.sampleSize("sample_size")
	c.InChannels = f.int("in_channels", 8)
	c.OutChannels = f.int("out_channels", 4)
	c.DownBlockTypes = f.strs("down_block_types", []string{CrossAttnDownBlockSpatioTemporal, CrossAttnDownBlockSpatioTemporal, CrossAttnDownBlockSpatioTemporal, DownBlockSpatioTemporal})
	c.UpBlockTypes = f.strs("up_block_types", []string{UpBlockSpatioTemporal, CrossAttnUpBlockSpatioTemporal, CrossAttnUpBlockSpatioTemporal, CrossAttnUpBlockSpatioTemporal})
	c.BlockOutChannels = f.ints("block_out_channels", []int{320, 640, 1280, 1280})
	c.AdditionTimeEmbedDim = f.int("addition_time_embed_dim", 256)
	c.ProjectionClassEmbeddingsInputDim = f.int("projection_class_embeddings_input_dim", 768)
	n := len(c.DownBlockTypes)
	c.LayersPerBlock = f.intOrList("layers_per_block", []int{2}, n)
	c.CrossAttentionDim = f.intOrList("cross_attention_dim", []int{1024}, n)
	heads := []int{5, 10, 20, 20}
	if n != len(heads) && f.raw("num_attention_heads") == nil {
		f.fail("num_attention_heads", "absent, and the default (5, 10, 20, 20) does not fit %d blocks", n)
	}
	c.NumAttentionHeads = f.intOrList("num_attention_heads", heads, n)
	c.TransformerLayersPerBlock = f.transformerLayers("transformer_layers_per_block", n)
	c.NumFrames = f.int("num_frames", 25)
	if f.err != nil {
		return UNetConfig{}, f.err
	}
	if err := c.Validate(); err != nil {
		return UNetConfig{}, err
	}
	return c, nil
}

// sampleSize reads an int, a [h, w] pair, or nothing.
func (f *fields) sampleSize(key string) []int {
	v := f.raw(key)
	if v == nil || f.err != nil {
		return nil
	}
	var one int
	if json.Unmarshal(v, &one) == nil {
		return []int{one}
	}
	var pair []int
	if json.Unmarshal(v, &pair) != nil || len(pair) != 2 {
		f.fail(key, "want an integer or [height, width], got %s", abbrev(v))
		return nil
	}
	return pair
}

// transformerLayers reads transformer_layers_per_block: an int, or a list with one item
// per block, each an int or a list of ints (one per layer).
func (f *fields) transformerLayers(key string, n int) [][]int {
	out := make([][]int, n)
	v := f.raw(key)
	if v == nil || f.err != nil {
		for i := range out {
			out[i] = []int{1}
		}
		return out
	}
	var one int
	if json.Unmarshal(v, &one) == nil {
		for i := range out {
			out[i] = []int{one}
		}
		return out
	}
	var items []json.RawMessage
	if json.Unmarshal(v, &items) != nil {
		f.fail(key, "want an integer or a list, got %s", abbrev(v))
		return nil
	}
	if len(items) != n {
		f.fail(key, "has %d items, want one per block (%d)", len(items), n)
		return nil
	}
	for i, it := range items {
		if json.Unmarshal(it, &one) == nil {
			out[i] = []int{one}
			continue
		}
		var per []int
		if json.Unmarshal(it, &per) != nil || len(per) == 0 {
			f.fail(key, "item %d: want an integer or a non-empty list of integers, got %s", i, abbrev(it))
			return nil
		}
		out[i] = per
	}
	return out
}

// NumBlocks is the number of down (and up) blocks.
func (c UNetConfig) NumBlocks() int { return len(c.DownBlockTypes) }

// TimeEmbedDim is the width of the time embedding: 4 * BlockOutChannels[0].
func (c UNetConfig) TimeEmbedDim() int { return 4 * c.BlockOutChannels[0] }

// NumAddedTimeIDs is how many added time ids the add_embedding expects
// (ProjectionClassEmbeddingsInputDim / AdditionTimeEmbedDim; 3 for SVD).
func (c UNetConfig) NumAddedTimeIDs() int {
	return c.ProjectionClassEmbeddingsInputDim / c.AdditionTimeEmbedDim
}

// DownHasAttention reports whether down block i is a cross-attention block.
func (c UNetConfig) DownHasAttention(i int) bool {
	return c.DownBlockTypes[i] == CrossAttnDownBlockSpatioTemporal
}

// UpHasAttention reports whether up block j is a cross-attention block.
func (c UNetConfig) UpHasAttention(j int) bool {
	return c.UpBlockTypes[j] == CrossAttnUpBlockSpatioTemporal
}

// TransformerLayers returns the number of transformer layers of layer `layer` of the
// block whose per-block index is i (down block i, up block NumBlocks()-1-i, or the mid
// block with i = NumBlocks()-1, layer 0), as diffusers expands
// transformer_layers_per_block.
func (c UNetConfig) TransformerLayers(i, layer int) int {
	per := c.TransformerLayersPerBlock[i]
	if len(per) == 1 {
		return per[0]
	}
	return per[layer]
}

// HeadDim returns the attention head width of per-block index i (0 when the block has no
// heads configured).
func (c UNetConfig) HeadDim(i int) int {
	if c.NumAttentionHeads[i] <= 0 {
		return 0
	}
	return c.BlockOutChannels[i] / c.NumAttentionHeads[i]
}

var knownDown = map[string]bool{CrossAttnDownBlockSpatioTemporal: true, DownBlockSpatioTemporal: true}
var knownUp = map[string]bool{CrossAttnUpBlockSpatioTemporal: true, UpBlockSpatioTemporal: true}

// Validate checks the consistency diffusers relies on (and a few things it would only
// fail on at run time). Errors name the config file.
func (c UNetConfig) Validate() error {
	k := checker{path: c.Path}
	n := len(c.DownBlockTypes)
	k.check(n > 0, "down_block_types is empty")
	k.check(len(c.UpBlockTypes) == n, "%d up_block_types for %d down_block_types", len(c.UpBlockTypes), n)
	k.check(len(c.BlockOutChannels) == n, "%d block_out_channels for %d down_block_types", len(c.BlockOutChannels), n)
	for _, p := range []struct {
		name string
		l    int
	}{{"layers_per_block", len(c.LayersPerBlock)}, {"cross_attention_dim", len(c.CrossAttentionDim)},
		{"num_attention_heads", len(c.NumAttentionHeads)}, {"transformer_layers_per_block", len(c.TransformerLayersPerBlock)}} {
		k.check(p.l == n, "%s has %d items for %d blocks", p.name, p.l, n)
	}
	if k.err != nil {
		return k.err
	}
	for i, t := range c.DownBlockTypes {
		k.check(knownDown[t], "down_block_types[%d]: unknown block type %q", i, t)
	}
	for j, t := range c.UpBlockTypes {
		k.check(knownUp[t], "up_block_types[%d]: unknown block type %q", j, t)
	}
	k.check(c.InChannels > 0 && c.OutChannels > 0, "in_channels %d and out_channels %d must be positive", c.InChannels, c.OutChannels)
	k.check(c.NumFrames > 0, "num_frames %d must be positive", c.NumFrames)
	k.check(c.AdditionTimeEmbedDim > 0 && c.ProjectionClassEmbeddingsInputDim > 0 &&
		c.ProjectionClassEmbeddingsInputDim%c.AdditionTimeEmbedDim == 0,
		"projection_class_embeddings_input_dim %d must be a positive multiple of addition_time_embed_dim %d",
		c.ProjectionClassEmbeddingsInputDim, c.AdditionTimeEmbedDim)
	k.check(c.SampleSize == nil || allPositive(c.SampleSize), "sample_size %v must be positive", c.SampleSize)
	for i := 0; i < n; i++ {
		ch := c.BlockOutChannels[i]
		k.check(ch > 0 && ch%GroupNormGroups == 0, "block_out_channels[%d] = %d is not a positive multiple of the %d GroupNorm groups", i, ch, GroupNormGroups)
		k.check(c.LayersPerBlock[i] > 0, "layers_per_block[%d] = %d must be positive", i, c.LayersPerBlock[i])
		// Down block i, up block n-1-i and (for the last index) the mid block use index i.
		attn := c.DownHasAttention(i) || c.UpHasAttention(n-1-i) || i == n-1
		if !attn {
			continue
		}
		h := c.NumAttentionHeads[i]
		k.check(h > 0 && ch%h == 0, "num_attention_heads[%d] = %d does not divide block_out_channels[%d] = %d", i, h, i, ch)
		k.check(c.CrossAttentionDim[i] > 0, "cross_attention_dim[%d] = %d must be positive", i, c.CrossAttentionDim[i])
		per := c.TransformerLayersPerBlock[i]
		k.check(allPositive(per), "transformer_layers_per_block[%d] = %v must be positive", i, per)
		if len(per) > 1 {
			need := 1
			if c.DownHasAttention(i) {
				need = max(need, c.LayersPerBlock[i])
			}
			if c.UpHasAttention(n - 1 - i) {
				need = max(need, c.LayersPerBlock[i]+1)
			}
			k.check(len(per) >= need, "transformer_layers_per_block[%d] lists %d layers, the blocks using it have %d", i, len(per), need)
		}
	}
	return k.err
}

// String summarises the config for logs.
func (c UNetConfig) String() string {
	return fmt.Sprintf("UNet(in %d, out %d, channels %v, heads %v, layers %v, cross %v, frames %d)",
		c.InChannels, c.OutChannels, c.BlockOutChannels, c.NumAttentionHeads, c.LayersPerBlock, c.CrossAttentionDim, c.NumFrames)
}
