package unet

import (
	"encoding/json"
	"fmt"

	"github.com/vdpp/vdpp/model/checkpoint"
)

// UNet block type names (diffusers).
const (
	CrossAttnDownBlockSpatioTemporal = "CrossAttnDownBlockSpatioTemporal"
	DownBlockSpatioTemporal          = "DownBlockSpatioTemporal"
	CrossAttnUpBlockSpatioTemporal   = "CrossAttnUpBlockSpatioTemporal"
	UpBlockSpatioTemporal            = "UpBlockSpatioTemporal"
)

// ClassName is the diffusers class of the SVD denoiser.
const ClassName = "UNetSpatioTemporalConditionModel"

// GroupNormGroups is the group count of every GroupNorm in the UNet (fixed in diffusers,
// not a config key).
const GroupNormGroups = 32

// Component is the UNet's folder in an SVD pipeline folder (model_index.json's key).
const Component = "unet"

// ReadConfig reads and validates the UNet's config.json of ck.
func ReadConfig(ck *checkpoint.Checkpoint) (Config, error) {
	path, data, err := ck.ReadConfig(Component)
	if err != nil {
		return Config{}, err
	}
	return ParseConfig(path, data)
}

// Config is unet/config.json of a UNetSpatioTemporalConditionModel, with diffusers'
// constructor defaults for absent keys and the int-or-list fields expanded per down block
// (index i of a per-block slice is down block i; up block j uses index NumBlocks()-1-j).
type Config struct {
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

// ParseConfig parses and validates a UNet config; path names the file in errors.
func ParseConfig(path string, data []byte) (Config, error) {
	f, err := checkpoint.ParseFields(path, data, checkpoint.ErrConfig)
	if err != nil {
		return Config{}, err
	}
	if cls := f.Str("_class_name", ClassName); cls != ClassName {
		f.Fail("_class_name", "%q is not %s", cls, ClassName)
	}
	c := Config{Path: path}
	c.SampleSize = sampleSize(f, "sample_size")
	c.InChannels = f.Int("in_channels", 8)
	c.OutChannels = f.Int("out_channels", 4)
	c.DownBlockTypes = f.Strs("down_block_types", []string{CrossAttnDownBlockSpatioTemporal, CrossAttnDownBlockSpatioTemporal, CrossAttnDownBlockSpatioTemporal, DownBlockSpatioTemporal})
	c.UpBlockTypes = f.Strs("up_block_types", []string{UpBlockSpatioTemporal, CrossAttnUpBlockSpatioTemporal, CrossAttnUpBlockSpatioTemporal, CrossAttnUpBlockSpatioTemporal})
	c.BlockOutChannels = f.Ints("block_out_channels", []int{320, 640, 1280, 1280})
	c.AdditionTimeEmbedDim = f.Int("addition_time_embed_dim", 256)
	c.ProjectionClassEmbeddingsInputDim = f.Int("projection_class_embeddings_input_dim", 768)
	n := len(c.DownBlockTypes)
	c.LayersPerBlock = f.IntOrList("layers_per_block", []int{2}, n)
	c.CrossAttentionDim = f.IntOrList("cross_attention_dim", []int{1024}, n)
	heads := []int{5, 10, 20, 20}
	if n != len(heads) && f.Raw("num_attention_heads") == nil {
		f.Fail("num_attention_heads", "absent, and the default (5, 10, 20, 20) does not fit %d blocks", n)
	}
	c.NumAttentionHeads = f.IntOrList("num_attention_heads", heads, n)
	c.TransformerLayersPerBlock = transformerLayers(f, "transformer_layers_per_block", n)
	c.NumFrames = f.Int("num_frames", 25)
	if f.Err() != nil {
		return Config{}, f.Err()
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// sampleSize reads an int, a [h, w] pair, or nothing.
func sampleSize(f *checkpoint.Fields, key string) []int {
	v := f.Raw(key)
	if v == nil || f.Err() != nil {
		return nil
	}
	var one int
	if json.Unmarshal(v, &one) == nil {
		return []int{one}
	}
	var pair []int
	if json.Unmarshal(v, &pair) != nil || len(pair) != 2 {
		f.Fail(key, "want an integer or [height, width], got %s", checkpoint.Abbrev(v))
		return nil
	}
	return pair
}

// transformerLayers reads transformer_layers_per_block: an int, or a list with one item
// per block, each an int or a list of ints (one per layer).
func transformerLayers(f *checkpoint.Fields, key string, n int) [][]int {
	out := make([][]int, n)
	v := f.Raw(key)
	if v == nil || f.Err() != nil {
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
		f.Fail(key, "want an integer or a list, got %s", checkpoint.Abbrev(v))
		return nil
	}
	if len(items) != n {
		f.Fail(key, "has %d items, want one per block (%d)", len(items), n)
		return nil
	}
	for i, it := range items {
		if json.Unmarshal(it, &one) == nil {
			out[i] = []int{one}
			continue
		}
		var per []int
		if json.Unmarshal(it, &per) != nil || len(per) == 0 {
			f.Fail(key, "item %d: want an integer or a non-empty list of integers, got %s", i, checkpoint.Abbrev(it))
			return nil
		}
		out[i] = per
	}
	return out
}

// NumBlocks is the number of down (and up) blocks.
func (c Config) NumBlocks() int { return len(c.DownBlockTypes) }

// TimeEmbedDim is the width of the time embedding: 4 * BlockOutChannels[0].
func (c Config) TimeEmbedDim() int { return 4 * c.BlockOutChannels[0] }

// NumAddedTimeIDs is how many added time ids the add_embedding expects
// (ProjectionClassEmbeddingsInputDim / AdditionTimeEmbedDim; 3 for SVD).
func (c Config) NumAddedTimeIDs() int {
	return c.ProjectionClassEmbeddingsInputDim / c.AdditionTimeEmbedDim
}

// DownHasAttention reports whether down block i is a cross-attention block.
func (c Config) DownHasAttention(i int) bool {
	return c.DownBlockTypes[i] == CrossAttnDownBlockSpatioTemporal
}

// UpHasAttention reports whether up block j is a cross-attention block.
func (c Config) UpHasAttention(j int) bool {
	return c.UpBlockTypes[j] == CrossAttnUpBlockSpatioTemporal
}

// TransformerLayers returns the number of transformer layers of layer `layer` of the
// block whose per-block index is i (down block i, up block NumBlocks()-1-i, or the mid
// block with i = NumBlocks()-1, layer 0), as diffusers expands
// transformer_layers_per_block.
func (c Config) TransformerLayers(i, layer int) int {
	per := c.TransformerLayersPerBlock[i]
	if len(per) == 1 {
		return per[0]
	}
	return per[layer]
}

// HeadDim returns the attention head width of per-block index i (0 when the block has no
// heads configured).
func (c Config) HeadDim(i int) int {
	if c.NumAttentionHeads[i] <= 0 {
		return 0
	}
	return c.BlockOutChannels[i] / c.NumAttentionHeads[i]
}

var knownDown = map[string]bool{CrossAttnDownBlockSpatioTemporal: true, DownBlockSpatioTemporal: true}
var knownUp = map[string]bool{CrossAttnUpBlockSpatioTemporal: true, UpBlockSpatioTemporal: true}

// Validate checks the consistency diffusers relies on (and a few things it would only
// fail on at run time). Errors name the config file.
func (c Config) Validate() error {
	k := checkpoint.Checker{Path: c.Path}
	n := len(c.DownBlockTypes)
	k.Check(n > 0, "down_block_types is empty")
	k.Check(len(c.UpBlockTypes) == n, "%d up_block_types for %d down_block_types", len(c.UpBlockTypes), n)
	k.Check(len(c.BlockOutChannels) == n, "%d block_out_channels for %d down_block_types", len(c.BlockOutChannels), n)
	for _, p := range []struct {
		name string
		l    int
	}{{"layers_per_block", len(c.LayersPerBlock)}, {"cross_attention_dim", len(c.CrossAttentionDim)},
		{"num_attention_heads", len(c.NumAttentionHeads)}, {"transformer_layers_per_block", len(c.TransformerLayersPerBlock)}} {
		k.Check(p.l == n, "%s has %d items for %d blocks", p.name, p.l, n)
	}
	if k.Err() != nil {
		return k.Err()
	}
	for i, t := range c.DownBlockTypes {
		k.Check(knownDown[t], "down_block_types[%d]: unknown block type %q", i, t)
	}
	for j, t := range c.UpBlockTypes {
		k.Check(knownUp[t], "up_block_types[%d]: unknown block type %q", j, t)
	}
	k.Check(c.InChannels > 0 && c.OutChannels > 0, "in_channels %d and out_channels %d must be positive", c.InChannels, c.OutChannels)
	k.Check(c.NumFrames > 0, "num_frames %d must be positive", c.NumFrames)
	k.Check(c.AdditionTimeEmbedDim > 0 && c.ProjectionClassEmbeddingsInputDim > 0 &&
		c.ProjectionClassEmbeddingsInputDim%c.AdditionTimeEmbedDim == 0,
		"projection_class_embeddings_input_dim %d must be a positive multiple of addition_time_embed_dim %d",
		c.ProjectionClassEmbeddingsInputDim, c.AdditionTimeEmbedDim)
	k.Check(c.SampleSize == nil || checkpoint.AllPositive(c.SampleSize), "sample_size %v must be positive", c.SampleSize)
	for i := 0; i < n; i++ {
		ch := c.BlockOutChannels[i]
		k.Check(ch > 0 && ch%GroupNormGroups == 0, "block_out_channels[%d] = %d is not a positive multiple of the %d GroupNorm groups", i, ch, GroupNormGroups)
		k.Check(c.LayersPerBlock[i] > 0, "layers_per_block[%d] = %d must be positive", i, c.LayersPerBlock[i])
		// Down block i, up block n-1-i and (for the last index) the mid block use index i.
		attn := c.DownHasAttention(i) || c.UpHasAttention(n-1-i) || i == n-1
		if !attn {
			continue
		}
		h := c.NumAttentionHeads[i]
		k.Check(h > 0 && ch%h == 0, "num_attention_heads[%d] = %d does not divide block_out_channels[%d] = %d", i, h, i, ch)
		k.Check(c.CrossAttentionDim[i] > 0, "cross_attention_dim[%d] = %d must be positive", i, c.CrossAttentionDim[i])
		per := c.TransformerLayersPerBlock[i]
		k.Check(checkpoint.AllPositive(per), "transformer_layers_per_block[%d] = %v must be positive", i, per)
		if len(per) > 1 {
			need := 1
			if c.DownHasAttention(i) {
				need = max(need, c.LayersPerBlock[i])
			}
			if c.UpHasAttention(n - 1 - i) {
				need = max(need, c.LayersPerBlock[i]+1)
			}
			k.Check(len(per) >= need, "transformer_layers_per_block[%d] lists %d layers, the blocks using it have %d", i, len(per), need)
		}
	}
	return k.Err()
}

// String summarises the config for logs.
func (c Config) String() string {
	return fmt.Sprintf("UNet(in %d, out %d, channels %v, heads %v, layers %v, cross %v, frames %d)",
		c.InChannels, c.OutChannels, c.BlockOutChannels, c.NumAttentionHeads, c.LayersPerBlock, c.CrossAttentionDim, c.NumFrames)
}
