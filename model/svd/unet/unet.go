package unet

import (
	"errors"
	"fmt"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import

	"github.com/vdpp/vdpp/model/nn"
)

// Sentinel errors of the package, matched with errors.Is.
var (
	// ErrConfig: the config describes a network this package cannot build.
	ErrConfig = errors.New("unet: unsupported config")
	// ErrInput: an input tensor has the wrong rank or shape.
	ErrInput = errors.New("unet: invalid input")
)

// Resnet GroupNorm eps per block kind, as diffusers wires them.
const (
	epsDown      = 1e-5 // DownBlockSpatioTemporal
	epsCrossDown = 1e-6 // CrossAttnDownBlockSpatioTemporal
	epsMid       = 1e-5 // UNetMidBlockSpatioTemporal
	epsUp        = 1e-6 // both up block kinds (class default)
	epsOut       = 1e-5 // conv_norm_out
)

// checkConfig reports configs that diffusers accepts at construction but that cannot run
// (or that this package does not build): every block reading encoder_hidden_states must
// share its width.
func checkConfig(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	n := cfg.NumBlocks()
	d := cfg.CrossAttentionDim[n-1]
	for i := range n {
		if (cfg.DownHasAttention(i) || cfg.UpHasAttention(n-1-i)) && cfg.CrossAttentionDim[i] != d {
			return fmt.Errorf("%w: %s: cross_attention_dim %v differs between blocks that share encoder_hidden_states", ErrConfig, cfg.Path, cfg.CrossAttentionDim)
		}
	}
	return nil
}

// checkInputShapes validates the input dimensions against cfg (shared by Build and
// Model.Forward); timestep may be a scalar (nil), [1] or [B].
func checkInputShapes(cfg Config, sample, timestep, ehs, ids []int) error {
	if len(sample) != 5 || sample[2] != cfg.InChannels || sample[0] <= 0 || sample[1] <= 0 {
		return fmt.Errorf("%w: sample %v, want [B, T, %d, h, w]", ErrInput, sample, cfg.InChannels)
	}
	b := sample[0]
	switch {
	case len(timestep) == 0:
	case len(timestep) == 1 && (timestep[0] == 1 || timestep[0] == b):
	default:
		return fmt.Errorf("%w: timestep %v, want a scalar, [1] or [%d]", ErrInput, timestep, b)
	}
	d := cfg.CrossAttentionDim[cfg.NumBlocks()-1]
	if len(ehs) != 3 || ehs[0] != b || ehs[1] <= 0 || ehs[2] != d {
		return fmt.Errorf("%w: encoder_hidden_states %v, want [%d, S, %d]", ErrInput, ehs, b, d)
	}
	if k := cfg.NumAddedTimeIDs(); len(ids) != 2 || ids[0] != b || ids[1] != k {
		return fmt.Errorf("%w: added_time_ids %v, want [%d, %d]", ErrInput, ids, b, k)
	}
	return nil
}

// Build builds the forward graph of the UNet: sample [B, T, Cin, h, w], timestep [B], [1]
// or a scalar, ehs (encoder_hidden_states) [B, S, D] and addedTimeIDs [B, K] give
// [B, T, Cout, h, w]. Weights are read through s with their diffusers names. It panics
// (GoMLX's convention; nn.Program.Run returns the panic as an error) on an unsupported
// config, inconsistent input shapes or a missing / mis-shaped weight.
func Build(s nn.Scope, cfg Config, sample, timestep, ehs, addedTimeIDs *Node) *Node {
	if err := checkConfig(cfg); err != nil {
		panic(err)
	}
	if err := checkInputShapes(cfg, sample.Shape().Dimensions, timestep.Shape().Dimensions,
		ehs.Shape().Dimensions, addedTimeIDs.Shape().Dimensions); err != nil {
		panic(err)
	}
	g := sample.Graph()
	sd := sample.Shape().Dimensions
	b, t, cin, hh, ww := sd[0], sd[1], sd[2], sd[3], sd[4]
	f := frames{b: b, t: t}
	n := cfg.NumBlocks()
	ch := cfg.BlockOutChannels
	embDim := cfg.TimeEmbedDim()

	// 1-2. Time and added-time embeddings, [B, E], repeated per frame.
	ts := BroadcastToDims(Reshape(timestep, -1), b)
	emb := timestepEmbedding(s.In("time_embedding"), nn.Timesteps(ts, ch[0], true, 0), embDim, embDim)
	k := addedTimeIDs.Shape().Dim(1)
	aug := nn.Timesteps(Reshape(addedTimeIDs, b*k), cfg.AdditionTimeEmbedDim, true, 0)
	aug = Reshape(aug, b, k*cfg.AdditionTimeEmbedDim)
	emb = Add(emb, timestepEmbedding(s.In("add_embedding"), aug, embDim, embDim))
	emb = repeatInterleave(emb, t) // [B·T, E]
	ctx := ehs                     // [B, S, D]: the blocks repeat it per frame / pixel

	// 3. conv_in.
	x := Reshape(sample, b*t, cin, hh, ww)
	x = nn.Conv2D(x, s.Param(g, "conv_in.weight", ch[0], cin, 3, 3), s.Param(g, "conv_in.bias", ch[0]), nn.ConvOpts{Padding: 1})

	// 4. Down path; skips starts with conv_in's output.
	skips := []*Node{x}
	for i := range n {
		bs := s.Inf("down_blocks.%d", i)
		attn := cfg.DownHasAttention(i)
		eps := epsDown
		if attn {
			eps = epsCrossDown
		}
		for l := range cfg.LayersPerBlock[i] {
			x = spatioTemporalResBlock(bs.Inf("resnets.%d", l), x, emb, f, ch[i], eps)
			if attn {
				x = transformerSpatioTemporal(bs.Inf("attentions.%d", l), x, ctx, f, spec(cfg, i, l))
			}
			skips = append(skips, x)
		}
		if i < n-1 {
			x = nn.Conv2D(x, bs.Param(g, "downsamplers.0.conv.weight", ch[i], ch[i], 3, 3),
				bs.Param(g, "downsamplers.0.conv.bias", ch[i]), nn.ConvOpts{Stride: 2, Padding: 1})
			skips = append(skips, x)
		}
	}

	// 5. Mid block.
	ms := s.In("mid_block")
	x = spatioTemporalResBlock(ms.In("resnets.0"), x, emb, f, ch[n-1], epsMid)
	x = transformerSpatioTemporal(ms.In("attentions.0"), x, ctx, f, spec(cfg, n-1, 0))
	x = spatioTemporalResBlock(ms.In("resnets.1"), x, emb, f, ch[n-1], epsMid)

	// 6. Up path. When h or w is not a multiple of 2^(n-1), every upsampler interpolates
	// to the size of the next skip instead of doubling.
	factor := 1 << (n - 1)
	toSkipSize := hh%factor != 0 || ww%factor != 0
	for j := range n {
		i := n - 1 - j
		us := s.Inf("up_blocks.%d", j)
		attn := cfg.UpHasAttention(j)
		for l := range cfg.LayersPerBlock[i] + 1 {
			skip := skips[len(skips)-1]
			skips = skips[:len(skips)-1]
			x = Concatenate([]*Node{x, skip}, 1)
			x = spatioTemporalResBlock(us.Inf("resnets.%d", l), x, emb, f, ch[i], epsUp)
			if attn {
				x = transformerSpatioTemporal(us.Inf("attentions.%d", l), x, ctx, f, spec(cfg, i, l))
			}
		}
		if j < n-1 {
			xd := x.Shape().Dimensions
			oh, ow := 2*xd[2], 2*xd[3]
			if toSkipSize {
				sk := skips[len(skips)-1].Shape().Dimensions
				oh, ow = sk[2], sk[3]
			}
			x = resizeNearest(x, oh, ow)
			x = nn.Conv2D(x, us.Param(g, "upsamplers.0.conv.weight", ch[i], ch[i], 3, 3),
				us.Param(g, "upsamplers.0.conv.bias", ch[i]), nn.ConvOpts{Padding: 1})
		}
	}

	// 7. Output head.
	x = nn.GroupNorm(x, s.Param(g, "conv_norm_out.weight", ch[0]), s.Param(g, "conv_norm_out.bias", ch[0]), groups, epsOut)
	x = nn.Conv2D(nn.SiLU(x), s.Param(g, "conv_out.weight", cfg.OutChannels, ch[0], 3, 3),
		s.Param(g, "conv_out.bias", cfg.OutChannels), nn.ConvOpts{Padding: 1})
	return Reshape(x, b, t, cfg.OutChannels, hh, ww)
}

// spec returns the transformer shape of layer l of the blocks with per-block index i.
func spec(cfg Config, i, l int) attnSpec {
	h := cfg.NumAttentionHeads[i]
	return attnSpec{heads: h, headDim: cfg.BlockOutChannels[i] / h, layers: cfg.TransformerLayers(i, l)}
}

// repeatInterleave repeats every row of x [B, ...] t times: [B·t, ...] (torch's
// repeat_interleave on dim 0).
func repeatInterleave(x *Node, t int) *Node {
	d := x.Shape().Dimensions
	bd := append([]int{d[0], t}, d[1:]...)
	rd := append([]int{d[0] * t}, d[1:]...)
	return Reshape(BroadcastToDims(InsertAxes(x, 1), bd...), rd...)
}
