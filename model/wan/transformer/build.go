package transformer

import (
	"fmt"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import

	"github.com/vdpp/vdpp/model/nn"
)

// imageEmbedEps is the eps of the image embedder's two FP32LayerNorms (torch's default).
const imageEmbedEps = 1e-5

// Shapes is what an input set means for the network: batch, the latent grid after
// patching, the token count, and whether the timestep is per token.
type Shapes struct {
	Batch            int
	Frames, Height   int // latent frames and height of the input
	Width            int
	F, H, W          int // patches along each axis
	Tokens           int // F·H·W
	TextLen          int
	ImageLen         int // image tokens (0 without the image branch)
	PerTokenTimestep bool
}

// CheckInputs validates input shapes against cfg: hidden [B, in_channels, F, H, W],
// timestep a scalar, [1], [B] or [B, tokens] (expand_timesteps: one t per token),
// encoder_hidden_states [B, L, text_dim], and image [B, S, image_dim] exactly when the
// config has the image branch (nil otherwise; then L must be TextContextLen).
func CheckInputs(cfg Config, hidden, timestep, ehs, image []int) (Shapes, error) {
	var s Shapes
	if len(hidden) != 5 || hidden[0] <= 0 || hidden[1] != cfg.InChannels {
		return s, fmt.Errorf("%w: hidden_states %v, want [B, %d, frames, height, width]", ErrInput, hidden, cfg.InChannels)
	}
	p := cfg.PatchSize
	s.Batch, s.Frames, s.Height, s.Width = hidden[0], hidden[2], hidden[3], hidden[4]
	s.F, s.H, s.W = s.Frames/p[0], s.Height/p[1], s.Width/p[2]
	if s.F <= 0 || s.H <= 0 || s.W <= 0 {
		return s, fmt.Errorf("%w: hidden_states %v is smaller than one patch %v", ErrInput, hidden, p)
	}
	for i, n := range [3]int{s.F, s.H, s.W} {
		if n > cfg.RopeMaxSeqLen {
			return s, fmt.Errorf("%w: hidden_states %v gives %d patches along %s, more than rope_max_seq_len %d",
				ErrInput, hidden, n, [3]string{"frames", "height", "width"}[i], cfg.RopeMaxSeqLen)
		}
	}
	s.Tokens = s.F * s.H * s.W
	b := s.Batch
	switch {
	case len(timestep) == 0:
	case len(timestep) == 1 && (timestep[0] == 1 || timestep[0] == b):
	case len(timestep) == 2 && timestep[0] == b && timestep[1] == s.Tokens:
		s.PerTokenTimestep = true
	default:
		return s, fmt.Errorf("%w: timestep %v, want a scalar, [1], [%d] or [%d, %d] (one per token)", ErrInput, timestep, b, b, s.Tokens)
	}
	if len(ehs) != 3 || ehs[0] != b || ehs[1] <= 0 || ehs[2] != cfg.TextDim {
		return s, fmt.Errorf("%w: encoder_hidden_states %v, want [%d, L, %d]", ErrInput, ehs, b, cfg.TextDim)
	}
	s.TextLen = ehs[1]
	switch {
	case !cfg.HasImage() && image != nil:
		return s, fmt.Errorf("%w: encoder_hidden_states_image %v given to a transformer without image_dim", ErrInput, image)
	case cfg.HasImage() && image == nil:
		return s, fmt.Errorf("%w: this transformer (image_dim %d) needs encoder_hidden_states_image", ErrInput, cfg.ImageDim)
	case cfg.HasImage():
		if len(image) != 3 || image[1] <= 0 || image[2] != cfg.ImageDim {
			return s, fmt.Errorf("%w: encoder_hidden_states_image %v, want [%d, S, %d]", ErrInput, image, b, cfg.ImageDim)
		}
		rows, n := image[0], image[1]
		if cfg.PosEmbedSeqLen > 0 {
			// diffusers views [B', S, D] as [B'/2, 2S, D] (first and last frame) and adds pos_embed.
			if rows%2 != 0 || 2*n != cfg.PosEmbedSeqLen {
				return s, fmt.Errorf("%w: encoder_hidden_states_image %v, want [%d, %d, %d] (pos_embed_seq_len %d: two images per sample)",
					ErrInput, image, 2*b, cfg.PosEmbedSeqLen/2, cfg.ImageDim, cfg.PosEmbedSeqLen)
			}
			rows, n = rows/2, 2*n
		}
		if rows != b {
			return s, fmt.Errorf("%w: encoder_hidden_states_image %v has %d rows, batch is %d", ErrInput, image, rows, b)
		}
		if s.TextLen != TextContextLen {
			return s, fmt.Errorf("%w: encoder_hidden_states %v: a transformer with the image branch needs exactly %d text rows (diffusers splits [image | text] at L-%d)",
				ErrInput, ehs, TextContextLen, TextContextLen)
		}
		s.ImageLen = n
	}
	return s, nil
}

// Build builds the forward graph of WanTransformer3DModel: hidden [B, Cin, F, H, W],
// timestep (see CheckInputs), ehs [B, L, text_dim] and image [B, S, image_dim] or nil give
// [B, Cout, F', H', W'] with F' = (F/p_t)·p_t etc. Weights are read through s with their
// diffusers names. It panics (GoMLX's convention; nn.Program.Run returns the panic as an
// error) on an invalid config, inconsistent input shapes or a missing / mis-shaped weight.
func Build(s nn.Scope, cfg Config, hidden, timestep, ehs, image *Node) *Node {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	var imgDims []int
	if image != nil {
		imgDims = image.Shape().Dimensions
	}
	sh, err := CheckInputs(cfg, hidden.Shape().Dimensions, timestep.Shape().Dimensions, ehs.Shape().Dimensions, imgDims)
	if err != nil {
		panic(err)
	}
	g := hidden.Graph()
	e := embed(s, cfg, sh, hidden, timestep, ehs, image)
	n := sh.Tokens
	x := e.x

	// Rotary tables, shared by every block.
	rc, rs, err := RopeTables(cfg, sh.F, sh.H, sh.W)
	if err != nil {
		panic(err)
	}
	ce2, so := ropePairs(rc, rs, n, cfg.AttentionHeadDim)
	half := cfg.AttentionHeadDim / 2
	rope := [2]*Node{
		Reshape(Const(g, ce2), 1, n, 1, half),
		Reshape(Const(g, so), 1, n, 1, half),
	}

	for l := range cfg.NumLayers {
		x = block(s.Inf("blocks.%d", l), cfg, x, e.ctx, e.img, e.tproj, rope)
	}
	return head(s, cfg, sh, x, e.temb)
}

// embedded is what the network computes once before its blocks: the patch tokens x
// [B, N, D], the time embedding temb [B, S, D] and its projection tproj [B, S, 6, D]
// (S = 1, or N with a per-token timestep), the text context ctx [B, L, D] and the image
// context img [B, S', D] (nil without the image branch).
type embedded struct{ x, temb, tproj, ctx, img *Node }

// embed is the patch embedding and the condition embedder. sh may describe a shard of the
// frames (context parallelism): every patch and every token's time embedding is computed
// on its own.
func embed(s nn.Scope, cfg Config, sh Shapes, hidden, timestep, ehs, image *Node) embedded {
	g := hidden.Graph()
	dim := cfg.InnerDim()
	b, n := sh.Batch, sh.Tokens
	var e embedded
	e.x = patchEmbed(s, cfg, sh, hidden) // [B, N, D]

	// Time: one t per row (S = 1) or per token (S = N).
	steps := 1
	if sh.PerTokenTimestep {
		steps = n
	}
	ts := Reshape(timestep, -1)
	if !sh.PerTokenTimestep {
		ts = BroadcastToDims(ts, b)
	}
	sinus := nn.Timesteps(ts, cfg.FreqDim, true, 0) // [B·S, freq]: [cos | sin]
	ce := s.In("condition_embedder")
	temb := linear(ce.In("time_embedder.linear_1"), g, sinus, cfg.FreqDim, dim)
	temb = linear(ce.In("time_embedder.linear_2"), g, nn.SiLU(temb), dim, dim)
	tproj := linear(ce.In("time_proj"), g, nn.SiLU(temb), dim, 6*dim)
	e.tproj = Reshape(tproj, b, steps, 6, dim)
	e.temb = Reshape(temb, b, steps, dim)

	// Text (and image) context.
	ctx := linearAct(ce.In("text_embedder.linear_1"), g, ehs, cfg.TextDim, dim, nn.ActGELUTanh)
	e.ctx = linear(ce.In("text_embedder.linear_2"), g, ctx, dim, dim)
	if cfg.HasImage() {
		e.img = imageEmbed(ce.In("image_embedder"), cfg, image)
	}
	return e
}

// head is the output norm, modulated by temb (not timestep_proj), the projection and the
// unpatchify of the tokens x [B, N, D] of sh.
func head(s nn.Scope, cfg Config, sh Shapes, x, temb *Node) *Node {
	g := x.Graph()
	dim := cfg.InnerDim()
	table := s.Param(g, "scale_shift_table", 1, 2, dim)
	shift := Add(Reshape(nn.PickAxis(table, 1, 0), 1, 1, dim), temb)
	scale := Add(Reshape(nn.PickAxis(table, 1, 1), 1, 1, dim), temb)
	x = nn.LayerNormModulated(x, nil, nil, scale, shift, cfg.Eps)
	x = linear(s.In("proj_out"), g, x, dim, cfg.OutChannels*cfg.PatchVolume())
	return unpatchify(cfg, sh, x)
}

// linear reads <scope>.weight [out, in] and <scope>.bias [out] and applies them.
func linear(s nn.Scope, g *Graph, x *Node, in, out int) *Node {
	return linearAct(s, g, x, in, out, nn.ActNone)
}

// linearAct is linear followed by act (fused with vdpp's CPU kernels).
func linearAct(s nn.Scope, g *Graph, x *Node, in, out int, act nn.Activation) *Node {
	return nn.LinearAct(x, s.Param(g, "weight", out, in), s.Param(g, "bias", out), act)
}

// rmsNorm is torch.nn.RMSNorm over the last axis: x / √(mean(x²) + eps) · weight.
func rmsNorm(x, weight *Node, eps float64) *Node { return nn.RMSNorm(x, weight, eps) }

// patchEmbed is the Conv3d with kernel = stride = patch as one matrix product over
// non-overlapping patches: [B, Cin, F, H, W] -> tokens [B, N, D] in (frame, row, column)
// order. Trailing frames, rows or columns that do not fill a patch are dropped, as the
// strided convolution drops them.
func patchEmbed(s nn.Scope, cfg Config, sh Shapes, hidden *Node) *Node {
	g := hidden.Graph()
	p := cfg.PatchSize
	cin, dim := cfg.InChannels, cfg.InnerDim()
	x := hidden
	if sh.F*p[0] != sh.Frames || sh.H*p[1] != sh.Height || sh.W*p[2] != sh.Width {
		x = Slice(x, AxisRange(), AxisRange(), AxisRange(0, sh.F*p[0]), AxisRange(0, sh.H*p[1]), AxisRange(0, sh.W*p[2]))
	}
	x = Reshape(x, sh.Batch, cin, sh.F, p[0], sh.H, p[1], sh.W, p[2])
	x = TransposeAllAxes(x, 0, 2, 4, 6, 1, 3, 5, 7) // [B, f, h, w, C, pt, ph, pw]
	k := cin * cfg.PatchVolume()
	x = Reshape(x, sh.Batch, sh.Tokens, k)
	w := Reshape(s.Param(g, "patch_embedding.weight", dim, cin, p[0], p[1], p[2]), dim, k)
	return nn.Linear(x, w, s.Param(g, "patch_embedding.bias", dim))
}

// unpatchify turns proj_out's [B, N, pt·ph·pw·C] (features ordered pt, ph, pw, C) into
// [B, C, f·pt, h·ph, w·pw].
func unpatchify(cfg Config, sh Shapes, x *Node) *Node {
	p := cfg.PatchSize
	c := cfg.OutChannels
	x = Reshape(x, sh.Batch, sh.F, sh.H, sh.W, p[0], p[1], p[2], c)
	x = TransposeAllAxes(x, 0, 7, 1, 4, 2, 5, 3, 6)
	return Reshape(x, sh.Batch, c, sh.F*p[0], sh.H*p[1], sh.W*p[2])
}

// imageEmbed is WanImageEmbedding: [optional pos_embed] -> LayerNorm -> Linear -> GELU
// (exact) -> Linear -> LayerNorm, giving [B, S, D].
func imageEmbed(s nn.Scope, cfg Config, image *Node) *Node {
	g := image.Graph()
	d := image.Shape().Dimensions
	in, dim := cfg.ImageDim, cfg.InnerDim()
	x := image
	if cfg.PosEmbedSeqLen > 0 {
		x = Reshape(x, d[0]/2, 2*d[1], in)
		x = Add(x, s.Param(g, "pos_embed", 1, cfg.PosEmbedSeqLen, in))
	}
	x = nn.LayerNorm(x, s.Param(g, "norm1.weight", in), s.Param(g, "norm1.bias", in), imageEmbedEps)
	x = linearAct(s.In("ff.net.0.proj"), g, x, in, in, nn.ActGELU)
	x = linear(s.In("ff.net.2"), g, x, in, dim)
	return nn.LayerNorm(x, s.Param(g, "norm2.weight", dim), s.Param(g, "norm2.bias", dim), imageEmbedEps)
}

// block is one WanTransformerBlock. tproj is [B, S, 6, D] (S = 1 or N): shift, scale,
// gate for self-attention, then for the feed-forward.
func block(s nn.Scope, cfg Config, x, ctx, img, tproj *Node, rope [2]*Node) *Node {
	q, k, v := selfAttnQKV(s, cfg, x, tproj, rope)
	return blockRest(s, cfg, x, attend(q, k, v, cfg.NumAttentionHeads), ctx, img, tproj)
}

// modulation returns a block's six modulation vectors [B, S, D]: shift, scale, gate of
// self-attention, then of the feed-forward.
func modulation(s nn.Scope, cfg Config, tproj *Node) [6]*Node {
	dim := cfg.InnerDim()
	table := Reshape(s.Param(tproj.Graph(), "scale_shift_table", 1, 6, dim), 1, 1, 6, dim)
	mod := Add(table, tproj)
	var out [6]*Node
	for i := range out {
		out[i] = nn.PickAxis(mod, 2, i)
	}
	return out
}

// selfAttnQKV is a block's self-attention input: the modulated norm of x, then attn1's
// q, k (RMS-normed over all heads together, rotated) and v, each [B, N, D]. Every token is
// computed on its own, so a shard of the tokens gives the shard of q, k, v.
func selfAttnQKV(s nn.Scope, cfg Config, x, tproj *Node, rope [2]*Node) (q, k, v *Node) {
	m := modulation(s, cfg, tproj)
	h := nn.LayerNormModulated(x, nil, nil, m[1], m[0], cfg.Eps)
	return projectQKV(s.In("attn1"), cfg, h, h, rope)
}

// blockRest is the block after the self-attention product attn [B, N, D] (heads
// concatenated, before to_out): the gated residual, the cross-attention and the
// feed-forward.
func blockRest(s nn.Scope, cfg Config, x, attn, ctx, img, tproj *Node) *Node {
	g := x.Graph()
	dim := cfg.InnerDim()
	m := modulation(s, cfg, tproj)
	gate, cShift, cScale, cGate := m[2], m[3], m[4], m[5]
	x = Add(x, Mul(linear(s.In("attn1.to_out.0"), g, attn, dim, dim), gate))

	// 2. Cross-attention (norm2 is affine when cross_attn_norm).
	h := x
	if cfg.CrossAttnNorm {
		h = nn.LayerNorm(x, s.Param(g, "norm2.weight", dim), s.Param(g, "norm2.bias", dim), cfg.Eps)
	}
	x = Add(x, attention(s.In("attn2"), cfg, h, ctx, img, [2]*Node{}))

	// 3. Feed-forward.
	h = nn.LayerNormModulated(x, nil, nil, cScale, cShift, cfg.Eps)
	ff := linearAct(s.In("ffn.net.0.proj"), g, h, dim, cfg.FFNDim, nn.ActGELUTanh)
	ff = linear(s.In("ffn.net.2"), g, ff, cfg.FFNDim, dim)
	return Add(x, Mul(ff, cGate))
}

// attention is WanAttention with WanAttnProcessor: q from x, k and v from ctx, RMS norm of
// q and k over the whole inner dim (all heads together) before the split into heads, RoPE
// on q and k when rope is set, and, when img is set, a second attention of the same query
// to the image tokens (norm_added_k(add_k_proj(img)), add_v_proj(img)) added before to_out.
func attention(s nn.Scope, cfg Config, x, ctx, img *Node, rope [2]*Node) *Node {
	g := x.Graph()
	dim, heads := cfg.InnerDim(), cfg.NumAttentionHeads
	q, k, v := projectQKV(s, cfg, x, ctx, rope)
	out := attend(q, k, v, heads)
	if img != nil {
		ki := linear(s.In("add_k_proj"), g, img, cfg.AddedKVProjDim, dim)
		ki = rmsNorm(ki, s.Param(g, "norm_added_k.weight", dim), cfg.Eps)
		vi := linear(s.In("add_v_proj"), g, img, cfg.AddedKVProjDim, dim)
		out = Add(attend(q, ki, vi, heads), out)
	}
	return linear(s.In("to_out.0"), g, out, dim, dim)
}

// projectQKV is q from x, k and v from ctx, with the RMS norm of q and k over the whole
// inner dim (all heads together, before the split into heads) and RoPE when rope is set.
func projectQKV(s nn.Scope, cfg Config, x, ctx *Node, rope [2]*Node) (q, k, v *Node) {
	g := x.Graph()
	dim, heads := cfg.InnerDim(), cfg.NumAttentionHeads
	q = rmsNorm(linear(s.In("to_q"), g, x, dim, dim), s.Param(g, "norm_q.weight", dim), cfg.Eps)
	k = rmsNorm(linear(s.In("to_k"), g, ctx, dim, dim), s.Param(g, "norm_k.weight", dim), cfg.Eps)
	v = linear(s.In("to_v"), g, ctx, dim, dim)
	if rope[0] != nil {
		q = applyRope(q, rope, heads)
		k = applyRope(k, rope, heads)
	}
	return q, k, v
}

// applyRope rotates the pairs (x[2i], x[2i+1]) of every head of x [B, N, H·d]:
// (x1·cos − x2·sin, x1·sin + x2·cos) with cos, sin [1, N, 1, d/2].
func applyRope(x *Node, rope [2]*Node, heads int) *Node {
	d := x.Shape().Dimensions
	b, n, dm := d[0], d[1], d[2]
	half := dm / heads / 2
	xp := Reshape(x, b, n, heads, half, 2)
	x1 := nn.PickAxis(xp, 4, 0)
	x2 := nn.PickAxis(xp, 4, 1)
	cos, sin := rope[0], rope[1]
	o1 := Sub(Mul(x1, cos), Mul(x2, sin))
	o2 := Add(Mul(x1, sin), Mul(x2, cos))
	out := Concatenate([]*Node{InsertAxes(o1, -1), InsertAxes(o2, -1)}, -1)
	return Reshape(out, b, n, dm)
}
