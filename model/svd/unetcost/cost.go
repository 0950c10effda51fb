// Package unetcost counts the work of one call of the SVD UNet
// (UNetSpatioTemporalConditionModel) from its config alone: the floating-point operations
// of its matrix products, convolutions and attention, and its parameters.
//
// # Contract
//
// Count walks the network exactly as diffusers builds it (down blocks, mid block, up
// blocks with their skip connections, per-block channels, heads, transformer layers and
// cross-attention widths from unet.Config) and is pure: the same config and
// shape give the same numbers. FLOPs count a multiply-add as 2 and include only
// convolutions, linear layers and the two attention products (q·kᵀ and p·v); norms,
// activations, softmax, sinusoidal embeddings, resizes and additions (a few percent of the
// total) are left out, as is usual for achieved-TFLOP/s figures. A temporal convolution's
// padded taps are counted (cuDNN computes them). Params and Tensors count every tensor of
// the state dict, which the tests check against the real SVD-XT key list (1428 tensors,
// 1,524,623,082 parameters) and the dev checkpoint.
package unetcost

import (
	"fmt"

	"github.com/vdpp/vdpp/model/svd/unet"
)

// Shape is one UNet call: Batch videos (2 with classifier-free guidance) of Frames frames
// of Height x Width latents (1/8 of the pixel size).
type Shape struct{ Batch, Frames, Height, Width int }

// Cost is the work of one UNet call.
type Cost struct {
	// FLOPs by kind; Total is their sum.
	Conv, Linear, SpatialAttention, TemporalAttention, Total float64
	// Params and Tensors count the state dict.
	Params, Tensors int64
	// PeakActivationBytes estimates the float32 working memory of the call's largest
	// layer: the attention scores and their softmax ([B·T, heads, h·w, h·w] spatial,
	// [B·h·w, heads, T, T] temporal) or a convolution's input and output feature maps,
	// whichever is largest. Weights are not included; the whole call holds more (skip
	// connections), so this is a lower bound that grows as the real peak does.
	PeakActivationBytes float64
	// CutBytes is, for a Shallow or Probe part, the float32 bytes of the tensor at the
	// branch: the kept feature a shallow call reads (the input of the up module that
	// consumes the branch's skip), or the skip a probe returns.
	CutBytes float64
}

// Count returns the cost of one call of the UNet cfg on inputs of shape s.
func Count(cfg unet.Config, s Shape) (Cost, error) {
	return CountPart(cfg, s, Whole, 0)
}

// Part is the part of a call that runs (the DeepCache calls of unet.Model).
type Part int

const (
	// Whole is the whole network (Forward, ForwardKeep).
	Whole Part = iota
	// Shallow is the network without the part below a branch (ForwardShallow).
	Shallow
	// Probe is the network down to a branch's skip (ForwardProbe).
	Probe
)

// CountPart returns the cost of the part of one call of the UNet cfg on inputs of shape s
// that runs for a DeepCache call at branch (unet.Branches; ignored for Whole). Params and
// Tensors count the weights that part reads.
func CountPart(cfg unet.Config, s Shape, part Part, branch int) (Cost, error) {
	if err := cfg.Validate(); err != nil {
		return Cost{}, fmt.Errorf("unetcost: %w", err)
	}
	if s.Batch < 1 || s.Frames < 1 || s.Height < 1 || s.Width < 1 {
		return Cost{}, fmt.Errorf("unetcost: shape %+v has an empty dimension", s)
	}
	if n := unet.Branches(cfg); part != Whole && (branch < 0 || branch >= n) {
		return Cost{}, fmt.Errorf("unetcost: branch %d, the UNet has branches 0..%d", branch, n-1)
	}
	w := walker{cfg: cfg, b: float64(s.Batch), t: float64(s.Frames), n: float64(s.Batch * s.Frames), e: cfg.TimeEmbedDim(),
		part: part, cutSkip: branch + 1}
	w.unet(s.Height, s.Width)
	c := w.c
	if part == Probe {
		c = w.atCut
	}
	c.Total = c.Conv + c.Linear + c.SpatialAttention + c.TemporalAttention
	return c, nil
}

// walker accumulates the cost while visiting the modules.
type walker struct {
	cfg     unet.Config
	b, t, n float64 // batch, frames, batch·frames
	e       int     // time embedding width
	c       Cost
	part    Part
	cutSkip int  // the skip (push number) of the branch
	atCut   Cost // the cost when the branch's skip was pushed
}

// pushed notes that skip number k, of c channels at h x wd, was pushed.
func (w *walker) pushed(k, c, h, wd int) {
	if k == w.cutSkip {
		w.atCut = w.c
		if w.part == Probe {
			w.atCut.CutBytes = 4 * w.n * float64(c*h*wd)
		}
	}
}

// popping notes that skip number k is about to be consumed by an up module whose input
// has c channels at h x wd: a shallow call runs from here, so what ran since the skip
// was pushed is dropped.
func (w *walker) popping(k, c, h, wd int) {
	if k == w.cutSkip && w.part == Shallow {
		w.c = w.atCut
		w.c.CutBytes = 4 * w.n * float64(c*h*wd)
	}
}

// linear is a Linear(in, out) applied to rows rows.
func (w *walker) linear(rows float64, in, out int, bias bool) {
	w.c.Linear += 2 * rows * float64(in) * float64(out)
	w.c.Params += int64(in) * int64(out)
	w.c.Tensors++
	if bias {
		w.c.Params += int64(out)
		w.c.Tensors++
	}
}

// conv is a convolution with taps kernel positions from cin to cout channels producing
// outputs output positions (all images together), with bias.
func (w *walker) conv(outputs float64, taps, cin, cout int) {
	w.peak(4 * outputs * float64(cin+cout))
	w.c.Conv += 2 * outputs * float64(taps) * float64(cin) * float64(cout)
	w.c.Params += int64(taps)*int64(cin)*int64(cout) + int64(cout)
	w.c.Tensors += 2
}

// peak records a layer's working bytes.
func (w *walker) peak(bytes float64) { w.c.PeakActivationBytes = max(w.c.PeakActivationBytes, bytes) }

// norm is a GroupNorm or LayerNorm with weight and bias of c channels.
func (w *walker) norm(c int) {
	w.c.Params += 2 * int64(c)
	w.c.Tensors += 2
}

// scalar is a one-element parameter (AlphaBlender's mix_factor).
func (w *walker) scalar() {
	w.c.Params++
	w.c.Tensors++
}

// unet is UNetSpatioTemporalConditionModel.forward on h x w latents.
func (w *walker) unet(h, wd int) {
	cfg := w.cfg
	ch := cfg.BlockOutChannels
	n := cfg.NumBlocks()
	c0, e := ch[0], w.e
	// Time and added-time embeddings run on the B videos, then are repeated per frame.
	w.linear(w.b, c0, e, true)
	w.linear(w.b, e, e, true)
	w.linear(w.b, cfg.ProjectionClassEmbeddingsInputDim, e, true)
	w.linear(w.b, e, e, true)
	w.conv(w.n*float64(h*wd), 9, cfg.InChannels, c0)

	type size struct{ h, w int }
	skips := []size{{h, wd}} // spatial size of each skip, with its channels below
	skipCh := []int{c0}
	cur, prev := size{h, wd}, c0
	for i := range n {
		for l := range cfg.LayersPerBlock[i] {
			w.resblock(cur.h, cur.w, prev, ch[i])
			prev = ch[i]
			if cfg.DownHasAttention(i) {
				w.transformer(cur.h, cur.w, ch[i], cfg.NumAttentionHeads[i], cfg.CrossAttentionDim[i], cfg.TransformerLayers(i, l))
			}
			skips, skipCh = append(skips, cur), append(skipCh, prev)
			w.pushed(len(skips)-1, prev, cur.h, cur.w)
		}
		if i < n-1 { // Downsample2D: 3x3 conv, stride 2, padding 1
			cur = size{(cur.h + 1) / 2, (cur.w + 1) / 2}
			w.conv(w.n*float64(cur.h*cur.w), 9, prev, prev)
			skips, skipCh = append(skips, cur), append(skipCh, prev)
			w.pushed(len(skips)-1, prev, cur.h, cur.w)
		}
	}
	// Mid block.
	top := ch[n-1]
	w.resblock(cur.h, cur.w, prev, top)
	w.transformer(cur.h, cur.w, top, cfg.NumAttentionHeads[n-1], cfg.CrossAttentionDim[n-1], cfg.TransformerLayers(n-1, 0))
	w.resblock(cur.h, cur.w, top, top)
	prev = top
	// Up blocks: resnet l of up block j takes concat(h, skip) and gives out channels.
	for j := range n {
		i := n - 1 - j
		out := ch[i]
		for l := range cfg.LayersPerBlock[i] + 1 {
			last := len(skips) - 1
			sk, skc := skips[last], skipCh[last]
			w.popping(last, prev, sk.h, sk.w)
			skips, skipCh = skips[:last], skipCh[:last]
			cur = sk
			w.resblock(cur.h, cur.w, prev+skc, out)
			prev = out
			if cfg.UpHasAttention(j) {
				w.transformer(cur.h, cur.w, out, cfg.NumAttentionHeads[i], cfg.CrossAttentionDim[i], cfg.TransformerLayers(i, l))
			}
		}
		if j < n-1 { // Upsample2D: nearest to the next skip's size, then a 3x3 conv
			cur = skips[len(skips)-1]
			w.conv(w.n*float64(cur.h*cur.w), 9, prev, prev)
		}
	}
	w.norm(c0) // conv_norm_out
	w.conv(w.n*float64(h*wd), 9, c0, cfg.OutChannels)
}

// resblock is SpatioTemporalResBlock(cin, cout) at h x w.
func (w *walker) resblock(h, wd, cin, cout int) {
	px := w.n * float64(h*wd)
	// spatial_res_block (ResnetBlock2D)
	w.norm(cin)
	w.conv(px, 9, cin, cout)
	w.linear(w.n, w.e, cout, true)
	w.norm(cout)
	w.conv(px, 9, cout, cout)
	if cin != cout {
		w.conv(px, 1, cin, cout)
	}
	// temporal_res_block (kernel (3, 1, 1) over frames)
	w.norm(cout)
	w.conv(px, 3, cout, cout)
	w.linear(w.n, w.e, cout, true)
	w.norm(cout)
	w.conv(px, 3, cout, cout)
	w.scalar() // time_mixer.mix_factor
}

// transformer is TransformerSpatioTemporalModel with c channels in heads heads, cross
// attention width d and layers transformer layers at h x w.
func (w *walker) transformer(h, wd, c, heads, d, layers int) {
	s := float64(h * wd)
	tokens := w.n * s
	if layers > 0 {
		// Scores and softmax, float32, of the spatial and the temporal self-attention.
		w.peak(2 * 4 * w.n * float64(heads) * s * s)
		w.peak(2 * 4 * w.b * s * float64(heads) * w.t * w.t)
	}
	w.norm(c)
	w.linear(tokens, c, c, true) // proj_in
	w.linear(w.n, c, 4*c, true)  // time_pos_embed
	w.linear(w.n, 4*c, c, true)
	for range layers {
		// BasicTransformerBlock over the h·w tokens of each frame.
		w.norm(c)
		w.attention(tokens, tokens, c, c)
		w.c.SpatialAttention += 2 * 2 * w.n * s * s * float64(c)
		w.norm(c)
		w.attention(tokens, w.n, c, d)
		w.c.SpatialAttention += 2 * 2 * tokens * float64(c) // one key
		w.norm(c)
		w.feedForward(tokens, c)
		// TemporalBasicTransformerBlock over the T frames of each position.
		w.norm(c)
		w.feedForward(tokens, c) // ff_in
		w.norm(c)
		w.attention(tokens, tokens, c, c)
		w.c.TemporalAttention += 2 * 2 * w.b * s * w.t * w.t * float64(c)
		w.norm(c)
		w.attention(tokens, w.b*s, c, d) // time_context: frame 0's ehs per position
		w.c.TemporalAttention += 2 * 2 * tokens * float64(c)
		w.norm(c)
		w.feedForward(tokens, c)
	}
	w.scalar()                   // time_mixer.mix_factor
	w.linear(tokens, c, c, true) // proj_out
}

// attention is the four projections of an Attention module: q from qRows rows of c, k and
// v from kvRows rows of width kvDim (c for self-attention), to_out with bias.
func (w *walker) attention(qRows, kvRows float64, c, kvDim int) {
	w.linear(qRows, c, c, false)
	w.linear(kvRows, kvDim, c, false)
	w.linear(kvRows, kvDim, c, false)
	w.linear(qRows, c, c, true)
}

// feedForward is diffusers' GEGLU FeedForward(c): Linear(c, 8c) then Linear(4c, c).
func (w *walker) feedForward(rows float64, c int) {
	w.linear(rows, c, 8*c, true)
	w.linear(rows, 4*c, c, true)
}

// XTConfigJSON is unet/config.json of SVD-XT (stabilityai/stable-video-diffusion-img2vid-xt).
const XTConfigJSON = `{
  "_class_name": "UNetSpatioTemporalConditionModel",
  "addition_time_embed_dim": 256,
  "block_out_channels": [320, 640, 1280, 1280],
  "cross_attention_dim": 1024,
  "down_block_types": ["CrossAttnDownBlockSpatioTemporal", "CrossAttnDownBlockSpatioTemporal", "CrossAttnDownBlockSpatioTemporal", "DownBlockSpatioTemporal"],
  "in_channels": 8,
  "layers_per_block": 2,
  "num_attention_heads": [5, 10, 20, 20],
  "num_frames": 25,
  "out_channels": 4,
  "projection_class_embeddings_input_dim": 768,
  "sample_size": 96,
  "transformer_layers_per_block": 1,
  "up_block_types": ["UpBlockSpatioTemporal", "CrossAttnUpBlockSpatioTemporal", "CrossAttnUpBlockSpatioTemporal", "CrossAttnUpBlockSpatioTemporal"]
}`

// XTConfig returns the SVD-XT UNet config.
func XTConfig() unet.Config {
	c, err := unet.ParseConfig("svd-xt", []byte(XTConfigJSON))
	if err != nil {
		panic(err) // a constant that does not parse is a programming error
	}
	return c
}
