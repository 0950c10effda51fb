package unet

import (
	"fmt"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import

	"github.com/vdpp/vdpp/model/nn"
)

// layers is what the UNet's layer sequence (walk) is written against. graphLayers applies
// each layer to graph nodes as it comes (Build, one rank); planBuilder records the layers
// as graph segments separated by the exchanges of the context-parallel forward
// (ForwardFrames). Only the layers that mix frames differ between the two; every other
// layer is a func of the running activation that both run as given.
type layers interface {
	// embed computes the time and added-time embeddings the res-blocks read.
	embed()
	// apply replaces the running activation x [B·T, C, h, w] by f(s, x), s the network's
	// root scope. Before the first layer, x is the sample [B, T, Cin, h, w].
	apply(name string, f func(s nn.Scope, x *Node) *Node)
	// resBlock is a SpatioTemporalResBlock at path.
	resBlock(path string, cout int, eps float64)
	// transformer is a TransformerSpatioTemporalModel at path.
	transformer(path string, a attnSpec)
	// pushSkip saves x for the up path; popSkip concatenates the last saved x to x's
	// channels.
	pushSkip()
	popSkip()
	// saveFeature keeps x as DeepCache's feature (an output of the call); loadFeature
	// replaces x by the feature the call was given (deepcache.go). A plain forward calls
	// neither.
	saveFeature()
	loadFeature()
	// saveSkips keeps the skips saved so far (outputs of a probe call); loadSkips replaces
	// them, and x by the last, with those the call was given (the rest of a probed call).
	saveSkips()
	loadSkips()
}

// walk runs the layer sequence of the UNet of cfg (diffusers'
// UNetSpatioTemporalConditionModel.forward) for latents of h x w through l. It is the only
// description of the sequence: the one-rank graph and the context-parallel plan both come
// from it.
func walk(cfg Config, h, w int, l layers) {
	n := cfg.NumBlocks()
	ch := cfg.BlockOutChannels
	// When h or w is not a multiple of 2^(n-1), every upsampler interpolates to the size of
	// the next skip instead of doubling, as diffusers does.
	factor := 1 << (n - 1)
	toSkipSize := h%factor != 0 || w%factor != 0
	var skipSizes [][2]int // the spatial size of every saved skip
	push := func() {
		l.pushSkip()
		skipSizes = append(skipSizes, [2]int{h, w})
	}

	// Time embeddings and conv_in; the skips start with conv_in's output.
	l.embed()
	l.apply("conv_in", func(s nn.Scope, x *Node) *Node { return convIn(s, cfg, x) })
	push()

	// Down path.
	for i := range n {
		path := fmt.Sprintf("down_blocks.%d", i)
		attn := cfg.DownHasAttention(i)
		eps := epsDown
		if attn {
			eps = epsCrossDown
		}
		for j := range cfg.LayersPerBlock[i] {
			l.resBlock(fmt.Sprintf("%s.resnets.%d", path, j), ch[i], eps)
			if attn {
				l.transformer(fmt.Sprintf("%s.attentions.%d", path, j), spec(cfg, i, j))
			}
			push()
		}
		if i < n-1 {
			l.apply(path+".downsamplers", func(s nn.Scope, x *Node) *Node {
				return conv2D(s.In(path), "downsamplers.0.conv", x, ch[i], 3, nn.ConvOpts{Stride: 2, Padding: 1})
			})
			h, w = (h-1)/2+1, (w-1)/2+1
			push()
		}
	}

	// Mid block.
	l.resBlock("mid_block.resnets.0", ch[n-1], epsMid)
	l.transformer("mid_block.attentions.0", spec(cfg, n-1, 0))
	l.resBlock("mid_block.resnets.1", ch[n-1], epsMid)

	// Up path.
	for j := range n {
		i := n - 1 - j
		path := fmt.Sprintf("up_blocks.%d", j)
		attn := cfg.UpHasAttention(j)
		for k := range cfg.LayersPerBlock[i] + 1 {
			l.popSkip()
			skipSizes = skipSizes[:len(skipSizes)-1]
			l.resBlock(fmt.Sprintf("%s.resnets.%d", path, k), ch[i], epsUp)
			if attn {
				l.transformer(fmt.Sprintf("%s.attentions.%d", path, k), spec(cfg, i, k))
			}
		}
		if j < n-1 {
			oh, ow := 2*h, 2*w
			if toSkipSize {
				oh, ow = skipSizes[len(skipSizes)-1][0], skipSizes[len(skipSizes)-1][1]
			}
			l.apply(path+".upsamplers", func(s nn.Scope, x *Node) *Node {
				return conv2D(s.In(path), "upsamplers.0.conv", resizeNearest(x, oh, ow), ch[i], 3, nn.ConvOpts{Padding: 1})
			})
			h, w = oh, ow
		}
	}

	// Output head.
	l.apply("head", func(s nn.Scope, x *Node) *Node {
		g := x.Graph()
		x = nn.GroupNormSiLU(x, s.Param(g, "conv_norm_out.weight", ch[0]), s.Param(g, "conv_norm_out.bias", ch[0]), groups, epsOut)
		return conv2D(s, "conv_out", x, cfg.OutChannels, 3, nn.ConvOpts{Padding: 1})
	})
}

// embedding is the time embedding plus the added-time embedding: [B, E], one row per
// video.
func embedding(s nn.Scope, cfg Config, timestep, ids *Node) *Node {
	b, k := ids.Shape().Dim(0), ids.Shape().Dim(1)
	embDim := cfg.TimeEmbedDim()
	ts := BroadcastToDims(Reshape(timestep, -1), b)
	emb := timestepEmbedding(s.In("time_embedding"), nn.Timesteps(ts, cfg.BlockOutChannels[0], true, 0), embDim, embDim)
	aug := nn.Timesteps(Reshape(ids, b*k), cfg.AdditionTimeEmbedDim, true, 0)
	aug = Reshape(aug, b, k*cfg.AdditionTimeEmbedDim)
	return Add(emb, timestepEmbedding(s.In("add_embedding"), aug, embDim, embDim))
}

// convIn flattens the sample [B, T, Cin, h, w] to frames and applies conv_in.
func convIn(s nn.Scope, cfg Config, sample *Node) *Node {
	d := sample.Shape().Dimensions
	x := Reshape(sample, d[0]*d[1], d[2], d[3], d[4])
	return conv2D(s, "conv_in", x, cfg.BlockOutChannels[0], 3, nn.ConvOpts{Padding: 1})
}

// conv2D is the torch Conv2d at name (a k x k kernel to cout channels, with bias) applied
// to x [N, C, h, w].
func conv2D(s nn.Scope, name string, x *Node, cout, k int, o nn.ConvOpts) *Node {
	g := x.Graph()
	cin := x.Shape().Dim(1)
	return nn.Conv2D(x, s.Param(g, name+".weight", cout, cin, k, k), s.Param(g, name+".bias", cout), o)
}
