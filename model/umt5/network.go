package umt5

import (
	"fmt"
	"math"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import

	"github.com/vdpp/vdpp/model/nn"
)

// maskedScore is what transformers adds to the scores of padding keys:
// (1 − mask)·torch.finfo(float32).min.
const maskedScore = -math.MaxFloat32

// activation returns transformers' ACT2FN[name] for the activations T5-family configs use.
func activation(name string) (func(*Node) *Node, error) {
	switch name {
	case "gelu_new", "gelu_pytorch_tanh":
		// 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
		return func(x *Node) *Node {
			inner := MulScalar(Add(x, MulScalar(Mul(x, Mul(x, x)), 0.044715)), math.Sqrt(2/math.Pi))
			return Mul(MulScalar(x, 0.5), OnePlus(Tanh(inner)))
		}, nil
	case "gelu", "gelu_python":
		return nn.GELU, nil
	case "relu":
		return func(x *Node) *Node { return Max(x, ZerosLike(x)) }, nil
	case "silu", "swish":
		return nn.SiLU, nil
	}
	return nil, fmt.Errorf("%w: activation %q (supported: gelu_new, gelu_pytorch_tanh, gelu, relu, silu)", ErrConfig, name)
}

// rmsNorm is UMT5LayerNorm: weight · x / √(mean(x²) + eps) over the last axis, no mean
// subtraction and no bias.
func rmsNorm(s nn.Scope, g *Graph, x *Node, name string, cfg Config) *Node {
	w := s.Param(g, name+".weight", cfg.DModel)
	if x == nil {
		return nil
	}
	return nn.RMSNorm(x, w, cfg.LayerNormEpsilon)
}

// linear is a bias-free torch.nn.Linear(in, out) reading <name>.weight.
func linear(s nn.Scope, g *Graph, x *Node, name string, in, out int) *Node {
	w := s.Param(g, name+".weight", out, in)
	if x == nil {
		return nil
	}
	return nn.Linear(x, w, nil)
}

// selfAttention is UMT5LayerSelfAttention's attention on normed h [B, L, D]: unscaled
// q·kᵀ plus the layer's own relative position bias and the padding mask addend maskAdd
// [B, 1, 1, L], softmax over keys, weighted values, output projection.
func selfAttention(s nn.Scope, g *Graph, h, buckets, maskAdd *Node, cfg Config) *Node {
	d, inner, heads, dk := cfg.DModel, cfg.InnerDim(), cfg.NumHeads, cfg.DKV
	q := linear(s, g, h, "q", d, inner)
	k := linear(s, g, h, "k", d, inner)
	v := linear(s, g, h, "v", d, inner)
	rel := s.Param(g, "relative_attention_bias.weight", cfg.RelativeAttentionNumBuckets, heads)
	var o *Node
	if h != nil {
		b, l := h.Shape().Dim(0), h.Shape().Dim(1)
		qh := Reshape(q, b, l, heads, dk)
		kh := Reshape(k, b, l, heads, dk)
		vh := Reshape(v, b, l, heads, dk)
		bias := Reshape(Gather(rel, buckets), l, l, heads)    // [L, L, H]
		bias = InsertAxes(TransposeAllAxes(bias, 2, 0, 1), 0) // [1, H, L, L]
		// transformers adds the mask to the bias first, then the sum to the scores.
		bias = Add(bias, maskAdd)
		if fused, ok := nn.FusedAttention(q, k, v, bias, heads, 1); ok {
			o = fused
		} else {
			scores := DotGeneral(qh, []int{3}, []int{0, 2}, kh, []int{3}, []int{0, 2}) // [B, H, L, L]
			p := Softmax(Add(scores, bias), -1)
			out := DotGeneral(p, []int{3}, []int{0, 1}, vh, []int{1}, []int{0, 2}) // [B, H, L, dk]
			o = Reshape(TransposeAllAxes(out, 0, 2, 1, 3), b, l, inner)
		}
	}
	return linear(s, g, o, "o", inner, d)
}

// feedForward is UMT5DenseGatedActDense (act(wi_0·h) ⊙ wi_1·h, then wo) or, for a
// non-gated config, UMT5DenseActDense (wo·act(wi·h)).
func feedForward(s nn.Scope, g *Graph, h *Node, cfg Config, act func(*Node) *Node) *Node {
	d, ff := cfg.DModel, cfg.DFF
	var x *Node
	if cfg.IsGatedAct {
		a := linear(s, g, h, "wi_0", d, ff)
		b := linear(s, g, h, "wi_1", d, ff)
		if h != nil {
			x = Mul(act(a), b)
		}
	} else {
		x = linear(s, g, h, "wi", d, ff)
		if x != nil {
			x = act(x)
		}
	}
	return linear(s, g, x, "wo", ff, d)
}

// buildEncoder is UMT5EncoderModel.forward on ids [B, L] (float32 holding integers) and
// mask [B, L] (1 real token, 0 padding); it returns last_hidden_state [B, L, D]. With ids
// nil it only declares the tensors.
func buildEncoder(root nn.Scope, g *Graph, ids, mask *Node, cfg Config) *Node {
	act, err := activation(cfg.DenseActFn)
	if err != nil {
		panic(err)
	}
	shared := root.Param(g, SharedEmbedding, cfg.VocabSize, cfg.DModel)
	var x, buckets, maskAdd *Node
	if ids != nil {
		b, l := ids.Shape().Dim(0), ids.Shape().Dim(1)
		idx := Reshape(ConvertDType(ids, dtypes.Int32), b*l, 1)
		x = Reshape(Gather(shared, idx), b, l, cfg.DModel)
		tbl := bucketTable(l, cfg.RelativeAttentionNumBuckets, cfg.RelativeAttentionMaxDistance)
		buckets = Reshape(Const(g, tbl), l*l, 1)
		maskAdd = Reshape(MulScalar(OneMinus(mask), maskedScore), b, 1, 1, l)
	}
	enc := root.In("encoder")
	for i := range cfg.NumLayers {
		blk := enc.Inf("block.%d", i)
		sa := blk.In("layer.0")
		h := rmsNorm(sa, g, x, "layer_norm", cfg)
		a := selfAttention(sa.In("SelfAttention"), g, h, buckets, maskAdd, cfg)
		if x != nil {
			x = Add(x, a)
		}
		ff := blk.In("layer.1")
		h = rmsNorm(ff, g, x, "layer_norm", cfg)
		f := feedForward(ff.In("DenseReluDense"), g, h, cfg, act)
		if x != nil {
			x = Add(x, f)
		}
	}
	return rmsNorm(enc, g, x, "final_layer_norm", cfg)
}
