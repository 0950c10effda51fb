package clip

import (
	"fmt"
	"math"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import

	"github.com/vdpp/vdpp/model/nn"
)

// visionOutputs are the tensors Forward returns, in this order.
type visionOutputs struct {
	imageEmbeds, lastHidden *Node
}

// layerNorm is torch.nn.LayerNorm(dim, eps) reading <name>.weight and <name>.bias.
func layerNorm(s nn.Scope, g *Graph, x *Node, name string, dim int, eps float64) *Node {
	w := s.Param(g, name+".weight", dim)
	b := s.Param(g, name+".bias", dim)
	if x == nil {
		return nil
	}
	return nn.LayerNorm(x, w, b, eps)
}

// linear is torch.nn.Linear(in, out) reading <name>.weight and, with bias, <name>.bias.
func linear(s nn.Scope, g *Graph, x *Node, name string, in, out int, bias bool) *Node {
	w := s.Param(g, name+".weight", out, in)
	var b *Node
	if bias {
		b = s.Param(g, name+".bias", out)
	}
	if x == nil {
		return nil
	}
	return nn.Linear(x, w, b)
}

// activation returns transformers' ACT2FN[name] for the activations CLIP configs use.
func activation(name string) (func(*Node) *Node, error) {
	switch name {
	case "gelu", "gelu_python":
		return nn.GELU, nil
	case "quick_gelu":
		return func(x *Node) *Node { return Mul(x, Logistic(MulScalar(x, 1.702))) }, nil
	case "gelu_new", "gelu_pytorch_tanh", "gelu_fast":
		// 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
		return func(x *Node) *Node {
			inner := MulScalar(Add(x, MulScalar(Mul(x, Mul(x, x)), 0.044715)), math.Sqrt(2/math.Pi))
			return Mul(MulScalar(x, 0.5), OnePlus(Tanh(inner)))
		}, nil
	}
	return nil, fmt.Errorf("%w: hidden_act %q", ErrUnsupported, name)
}

// encoderLayer is CLIPEncoderLayer: x += self_attn(layer_norm1(x));
// x += fc2(act(fc1(layer_norm2(x)))) on x [N, L, D].
func encoderLayer(s nn.Scope, g *Graph, x *Node, cfg Config, act func(*Node) *Node) *Node {
	d, eps := cfg.HiddenSize, cfg.LayerNormEps
	h := layerNorm(s, g, x, "layer_norm1", d, eps)
	a := s.In("self_attn")
	q := linear(a, g, h, "q_proj", d, d, true)
	k := linear(a, g, h, "k_proj", d, d, true)
	v := linear(a, g, h, "v_proj", d, d, true)
	var o *Node
	if x != nil {
		o = nn.Attention(q, k, v, cfg.NumAttentionHeads)
	}
	o = linear(a, g, o, "out_proj", d, d, true)
	if x != nil {
		x = Add(x, o)
	}
	h = layerNorm(s, g, x, "layer_norm2", d, eps)
	m := s.In("mlp")
	h = linear(m, g, h, "fc1", d, cfg.IntermediateSize, true)
	if h != nil {
		h = act(h)
	}
	h = linear(m, g, h, "fc2", cfg.IntermediateSize, d, true)
	if x == nil {
		return nil
	}
	return Add(x, h)
}

// buildVision is CLIPVisionModelWithProjection.forward on pixels [N, C, S, S]; with pixels
// nil it only declares the tensors.
func buildVision(root nn.Scope, g *Graph, pixels *Node, cfg Config) visionOutputs {
	vm := root.In("vision_model")
	x := buildHidden(vm, g, pixels, cfg, cfg.NumHiddenLayers)
	d := cfg.HiddenSize
	var pooled *Node
	if x != nil {
		pooled = Reshape(SliceAxis(x, 1, AxisRange(0, 1)), -1, d) // [N, D]
	}
	pooled = layerNorm(vm, g, pooled, "post_layernorm", d, cfg.LayerNormEps)
	embeds := linear(root, g, pooled, "visual_projection", d, cfg.ProjectionDim, false)
	return visionOutputs{imageEmbeds: embeds, lastHidden: x}
}

// buildHidden is CLIPVisionTransformer up to transformers' hidden_states[layers] on pixels
// [N, C, S, S] (vm is the vision_model scope): the patch and position embeddings, the
// class token, pre_layrnorm (hidden_states[0]), then the first layers encoder layers. With
// pixels nil it only declares the tensors it reads.
func buildHidden(vm nn.Scope, g *Graph, pixels *Node, cfg Config, layers int) *Node {
	act, err := activation(cfg.HiddenAct)
	if err != nil {
		panic(err)
	}
	emb := vm.In("embeddings")
	d, p, npos := cfg.HiddenSize, cfg.PatchSize, cfg.NumPositions()
	cls := emb.Param(g, "class_embedding", d)
	pw := emb.Param(g, "patch_embedding.weight", d, cfg.NumChannels, p, p)
	pos := emb.Param(g, "position_embedding.weight", npos, d)

	var x *Node
	if pixels != nil {
		n := pixels.Shape().Dim(0)
		patches := nn.Conv2D(pixels, pw, nil, nn.ConvOpts{Stride: p})   // [N, D, g, g]
		patches = TransposeAllAxes(Reshape(patches, n, d, -1), 0, 2, 1) // [N, g², D]
		clsTok := BroadcastToDims(Reshape(cls, 1, 1, d), n, 1, d)
		x = Concatenate([]*Node{clsTok, patches}, 1) // [N, npos, D]
		x = Add(x, Reshape(pos, 1, npos, d))
	}
	x = layerNorm(vm, g, x, "pre_layrnorm", d, cfg.LayerNormEps)
	for i := range layers {
		x = encoderLayer(vm.Inf("encoder.layers.%d", i), g, x, cfg, act)
	}
	return x
}
