package vae

import (
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import
	"github.com/gomlx/gomlx/pkg/core/shapes"

	"github.com/vdpp/vdpp/model/nn"
)

// The blocks follow the house convention: every tensor a block owns is read with
// Scope.Param first, and when x is nil the block only declares them and returns nil.
// Tensors are [B, C, T, H, W] throughout.

const (
	dtypeF32   = dtypes.Float32
	normEps    = 1e-12 // F.normalize
	logvarMin  = -30.0 // DiagonalGaussianDistribution clamp
	logvarMax  = 20.0
	spatialPad = 1
)

// causalConv is WanCausalConv3d(cin, cout, k, padding=k/2) with its cache: k = 3 pads the
// time axis with the two cached frames (zeros before the first chunk) and H, W by 1; k = 1
// is a plain pointwise convolution that needs no cache.
func causalConv(s nn.Scope, g *Graph, x *Node, c *stepCache, name string, cin, cout, k int) *Node {
	w := s.Param(g, name+".weight", cout, cin, k, k, k)
	b := s.Param(g, name+".bias", cout)
	if x == nil {
		return nil
	}
	if k == 1 {
		return nn.Conv3D(x, w, b, nn.ConvOpts{})
	}
	if c.first {
		// The context is zeros: pad the time axis in the convolution (the same sums) rather
		// than materialise zero frames, and keep [0, x] or x's last frames for the next chunk.
		c.keepFirst(x)
		p := k / 2
		return nn.Conv3D(x, w, b, nn.ConvOpts{Pads: [][2]int{{cacheFrames, 0}, {p, p}, {p, p}}})
	}
	return conv3DCausal(c.withContext(x), w, b, k/2)
}

// conv3DCausal is the Conv3D of a causal convolution on xin (its left context already
// prepended: no time padding, H and W padded by p). Where convolutions lower to im2col
// (simplego) it is the sum of one convolution per time tap: the gathered patches then
// take kh·kw times the input instead of kt·kh·kw times, which bounds the peak memory of
// the full-resolution layers (the VAE's largest tensors) three times lower.
func conv3DCausal(xin, w, b *Node, p int) *Node {
	pads := [][2]int{{0, 0}, {p, p}, {p, p}}
	kt := w.Shape().Dim(2)
	if kt == 1 || nn.ConvFormForGraph(xin.Graph()) != nn.ConvIm2Col {
		return nn.Conv3D(xin, w, b, nn.ConvOpts{Pads: pads})
	}
	t := xin.Shape().Dim(2) - kt + 1
	var y *Node
	for i := range kt {
		xi := SliceAxis(xin, 2, AxisRange(i, i+t))
		wi := SliceAxis(w, 2, AxisRange(i, i+1))
		yi := nn.Conv3D(xi, wi, nil, nn.ConvOpts{Pads: pads})
		if y == nil {
			y = yi
		} else {
			y = Add(y, yi)
		}
	}
	return Add(y, Reshape(b, 1, b.Shape().Dim(0), 1, 1, 1))
}

// rmsNorm is WanRMS_norm over the channel axis: F.normalize(x, dim=1)·√C·gamma, reading
// <name>.gamma of shape [C, 1, 1, 1] (images=false) or [C, 1, 1] (images=true).
func rmsNorm(s nn.Scope, g *Graph, x *Node, name string, ch int, images bool) *Node {
	return rmsNormAct(s, g, x, name, ch, images, false)
}

// rmsNormSiLU is rmsNorm followed by SiLU (one fused op with vdpp's CPU kernels).
func rmsNormSiLU(s nn.Scope, g *Graph, x *Node, name string, ch int) *Node {
	return rmsNormAct(s, g, x, name, ch, false, true)
}

func rmsNormAct(s nn.Scope, g *Graph, x *Node, name string, ch int, images, silu bool) *Node {
	dims := []int{ch, 1, 1, 1}
	if images {
		dims = dims[:3]
	}
	gamma := s.Param(g, name+".gamma", dims...)
	if x == nil {
		return nil
	}
	if silu {
		return nn.ChannelL2NormSiLU(x, gamma, normEps)
	}
	return nn.ChannelL2Norm(x, gamma, normEps)
}

// resnet is WanResidualBlock: shortcut (1×1×1 conv when cin != cout), then norm1, SiLU,
// conv1, norm2, SiLU, conv2 (both cached), plus the shortcut.
func resnet(s nn.Scope, g *Graph, x *Node, c *stepCache, cin, cout int) *Node {
	h := rmsNormSiLU(s, g, x, "norm1", cin)
	h = causalConv(s, g, h, c, "conv1", cin, cout, 3)
	h = rmsNormSiLU(s, g, h, "norm2", cout)
	h = causalConv(s, g, h, c, "conv2", cout, cout, 3)
	short := x
	if cin != cout {
		short = causalConv(s, g, x, c, "conv_shortcut", cin, cout, 1)
	}
	if x == nil {
		return nil
	}
	return Add(h, short)
}

// attention is WanAttentionBlock: per frame, an RMS norm, a 1×1 to_qkv, single-head
// softmax attention over the H·W positions, a 1×1 proj and the residual.
func attention(s nn.Scope, g *Graph, x *Node, ch int) *Node {
	h := rmsNorm(s, g, x, "norm", ch, true)
	wqkv := s.Param(g, "to_qkv.weight", 3*ch, ch, 1, 1)
	bqkv := s.Param(g, "to_qkv.bias", 3*ch)
	wp := s.Param(g, "proj.weight", ch, ch, 1, 1)
	bp := s.Param(g, "proj.bias", ch)
	if x == nil {
		return nil
	}
	d := x.Shape().Dimensions
	b, t, hh, ww := d[0], d[2], d[3], d[4]
	tok := Reshape(TransposeAllAxes(h, 0, 2, 3, 4, 1), b*t, hh*ww, ch) // [B·T, HW, C]
	qkv := nn.Linear(tok, Reshape(wqkv, 3*ch, ch), bqkv)
	q := SliceAxis(qkv, 2, AxisRange(0, ch))
	k := SliceAxis(qkv, 2, AxisRange(ch, 2*ch))
	v := SliceAxis(qkv, 2, AxisRange(2*ch, 3*ch))
	a := nn.AttentionAuto(q, k, v, 1)
	o := nn.Linear(a, Reshape(wp, ch, ch), bp)
	o = TransposeAllAxes(Reshape(o, b, t, hh, ww, ch), 0, 4, 1, 2, 3)
	return Add(o, x)
}

// midBlock is WanMidBlock with one attention layer: resnet, attention, resnet.
func midBlock(s nn.Scope, g *Graph, x *Node, c *stepCache, ch int) *Node {
	x = resnet(s.In("resnets.0"), g, x, c, ch, ch)
	x = attention(s.In("attentions.0"), g, x, ch)
	return resnet(s.In("resnets.1"), g, x, c, ch, ch)
}

// upsampleNearest2x is nearest-exact ×2 on H and W (each pixel repeated 2×2).
func upsampleNearest2x(x *Node) *Node {
	d := x.Shape().Dimensions
	e := Reshape(x, d[0], d[1], d[2], d[3], 1, d[4], 1)
	e = BroadcastToDims(e, d[0], d[1], d[2], d[3], 2, d[4], 2)
	return Reshape(e, d[0], d[1], d[2], 2*d[3], 2*d[4])
}

// perFrameConv2D runs a Conv2d [O, C, k, k] on every frame of x.
func perFrameConv2D(x, w, b *Node, o nn.ConvOpts) *Node {
	d := x.Shape().Dimensions
	f := Reshape(TransposeAllAxes(x, 0, 2, 1, 3, 4), d[0]*d[2], d[1], d[3], d[4])
	y := nn.Conv2D(f, w, b, o)
	yd := y.Shape().Dimensions
	return TransposeAllAxes(Reshape(y, d[0], d[2], yd[1], yd[2], yd[3]), 0, 2, 1, 3, 4)
}

// resampleMode is a WanResample mode.
type resampleMode int

const (
	upsample2d resampleMode = iota
	upsample3d
	downsample2d
	downsample3d
)

// upsample is WanResample's upsample2d / upsample3d on dim channels: for 3d, the cached
// time conv (skipped on the first chunk, so that frame is not doubled) gives 2·dim
// channels interleaved into twice the frames; then every frame is upsampled ×2
// (nearest-exact) and convolved 3×3 to outDim channels.
func upsample(s nn.Scope, g *Graph, x *Node, c *stepCache, mode resampleMode, dim, outDim int) *Node {
	w := s.Param(g, "resample.1.weight", outDim, dim, 3, 3)
	b := s.Param(g, "resample.1.bias", outDim)
	var tw, tb *Node
	if mode == upsample3d {
		tw = s.Param(g, "time_conv.weight", 2*dim, dim, 3, 1, 1)
		tb = s.Param(g, "time_conv.bias", 2*dim)
	}
	if x == nil {
		return nil
	}
	if mode == upsample3d {
		d := x.Shape().Dimensions
		if c.first {
			c.keep(Zeros(g, shapes.Make(dtypeF32, d[0], d[1], cacheFrames, d[3], d[4])))
		} else {
			y := nn.Conv3D(c.withContext(x), tw, tb, nn.ConvOpts{})
			t := d[2]
			// [B, 2, C, T, H, W] -> [B, C, T, 2, H, W] -> [B, C, 2T, H, W]
			y = Reshape(y, d[0], 2, d[1], t, d[3], d[4])
			y = TransposeAllAxes(y, 0, 2, 3, 1, 4, 5)
			x = Reshape(y, d[0], d[1], 2*t, d[3], d[4])
		}
	}
	return perFrameConv2D(upsampleNearest2x(x), Reshape(w, outDim, dim, 3, 3), b, nn.ConvOpts{Padding: spatialPad})
}

// downsample is WanResample's downsample2d / downsample3d: every frame padded by one
// zero row and column at the end and convolved 3×3 with stride 2; for 3d, the first
// chunk then passes through and keeps its last frame, and later chunks apply the time
// conv (kernel 3, stride 2, no padding) to [previous chunk's last frame, this chunk].
func downsample(s nn.Scope, g *Graph, x *Node, c *stepCache, mode resampleMode, dim int) *Node {
	w := s.Param(g, "resample.1.weight", dim, dim, 3, 3)
	b := s.Param(g, "resample.1.bias", dim)
	var tw, tb *Node
	if mode == downsample3d {
		tw = s.Param(g, "time_conv.weight", dim, dim, 3, 1, 1)
		tb = s.Param(g, "time_conv.bias", dim)
	}
	if x == nil {
		return nil
	}
	x = perFrameConv2D(x, w, b, nn.ConvOpts{Stride: 2, Pads: [][2]int{{0, 1}, {0, 1}}})
	if mode != downsample3d {
		return x
	}
	d := x.Shape().Dimensions
	last := SliceAxis(x, 2, AxisRange(d[2]-1, d[2]))
	if c.first {
		c.keep(last)
		return x
	}
	prev := c.prev(g, d[0], d[1], 1, d[3], d[4])
	c.keep(last)
	xin := Concatenate([]*Node{prev, x}, 2)
	y := nn.Conv3D(xin, tw, tb, nn.ConvOpts{})                       // stride 1 in time ...
	return SliceAxis(y, 2, AxisRange(0, y.Shape().Dim(2)).Stride(2)) // ... then every second frame
}

// avgDown is AvgDown3D: zero frames in front up to a multiple of ft, then each output
// channel averages a group of (input channel, ft, fs, fs) positions.
func avgDown(x *Node, cout, ft, fs int) *Node {
	d := x.Shape().Dimensions
	b, cin, t, h, w := d[0], d[1], d[2], d[3], d[4]
	if pad := (ft - t%ft) % ft; pad > 0 {
		x = Concatenate([]*Node{Zeros(x.Graph(), shapes.Make(dtypeF32, b, cin, pad, h, w)), x}, 2)
		t += pad
	}
	f := ft * fs * fs
	y := Reshape(x, b, cin, t/ft, ft, h/fs, fs, w/fs, fs)
	y = TransposeAllAxes(y, 0, 1, 3, 5, 7, 2, 4, 6) // [B, C, ft, fs, fs, T', H', W']
	y = Reshape(y, b, cout, cin*f/cout, t/ft, h/fs, w/fs)
	return ReduceMean(y, 2)
}

// dupUp is DupUp3D: every input channel repeated, spread over (ft, fs, fs) positions of
// cout channels; on the first chunk the first ft−1 frames are dropped.
func dupUp(x *Node, cout, ft, fs int, first bool) *Node {
	d := x.Shape().Dimensions
	b, cin, t, h, w := d[0], d[1], d[2], d[3], d[4]
	rep := cout * ft * fs * fs / cin
	y := Reshape(x, b, cin, 1, t, h, w)
	y = BroadcastToDims(y, b, cin, rep, t, h, w) // repeat_interleave on channels
	y = Reshape(y, b, cout, ft, fs, fs, t, h, w)
	y = TransposeAllAxes(y, 0, 1, 5, 2, 6, 3, 7, 4) // [B, C, T, ft, H, fs, W, fs]
	y = Reshape(y, b, cout, t*ft, h*fs, w*fs)
	if first && ft > 1 {
		y = SliceAxis(y, 2, AxisRange(ft-1, t*ft))
	}
	return y
}
