package wan

import (
	"context"
	"fmt"
	"slices"

	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/model/wan/transformer"
	"github.com/vdpp/vdpp/tensor"
)

// Conditioning keys of a Wan sample: the prompt embeddings [L, text_dim] and the negative
// prompt embeddings [L', text_dim] (the unconditional half of CFG).
const (
	KeyPromptEmbeds   = "prompt_embeds"
	KeyNegativeEmbeds = "negative_prompt_embeds"
)

// Denoiser is one Wan transformer (an expert) as a model.Denoiser: each row's latent
// [T, C, h, w] goes in as hidden_states [C, T, h, w], conditioned on the row's prompt
// embeddings (the negative ones for unconditional rows) and the step's timestep broadcast
// to the batch (per token with expand_timesteps), as WanPipeline calls it.
type Denoiser struct {
	M               *transformer.Model
	ExpandTimesteps bool
}

var _ model.Denoiser = (*Denoiser)(nil)

// WeightBytes implements model.Denoiser.
func (d *Denoiser) WeightBytes() int64 { return d.M.WeightBytes() }

// Predict implements model.Denoiser. Rows whose embeddings have the same length run in
// one transformer call; otherwise each row runs alone.
func (d *Denoiser) Predict(ctx context.Context, in model.Input) (*tensor.Dense, error) {
	return d.predict(ctx, in, func(latents *tensor.Dense, t float32, ehs []*tensor.Dense, _ []int) (*tensor.Dense, error) {
		return d.run(latents, t, ehs, nil, nil)
	})
}

// PredictFrames implements model.ContextParallel: in.Latents holds frames
// [part.Lo, part.Hi) of every row, the transformer's token sequence is sharded by those
// frames and its self-attentions exchange through part.Comm (Ulysses,
// transformer.Model.ForwardFrames). The output covers the same frames and, joined over the
// group, matches Predict within 1e-5 relative L2.
func (d *Denoiser) PredictFrames(ctx context.Context, in model.Input, part model.FramePart) (*tensor.Dense, error) {
	if part.Comm == nil {
		return nil, fmt.Errorf("wan: PredictFrames without a group")
	}
	if in.Latents != nil && len(in.Latents.Shape) == 5 && in.Latents.Shape[1] != part.Hi-part.Lo {
		return nil, fmt.Errorf("wan: latents hold %d frames, the part [%d, %d) of %d", in.Latents.Shape[1], part.Lo, part.Hi, part.Total)
	}
	return d.predict(ctx, in, func(latents *tensor.Dense, t float32, ehs []*tensor.Dense, _ []int) (*tensor.Dense, error) {
		return d.run(latents, t, ehs, &cpCall{ctx: ctx, part: part}, nil)
	})
}

var _ model.ContextParallel = (*Denoiser)(nil)

// cpCall is a context-parallel transformer call's shard and group.
type cpCall struct {
	ctx  context.Context
	part model.FramePart
}

// predict gathers each row's embeddings and calls run on rows of equal embedding length
// (rows: their indices in in).
func (d *Denoiser) predict(ctx context.Context, in model.Input, run func(latents *tensor.Dense, t float32, ehs []*tensor.Dense, rows []int) (*tensor.Dense, error)) (*tensor.Dense, error) {
	if err := in.Validate(); err != nil {
		return nil, fmt.Errorf("wan: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n := in.Rows()
	ehs := make([]*tensor.Dense, n)
	same := true
	for r := range n {
		key := KeyPromptEmbeds
		if in.Uncond[r] {
			key = KeyNegativeEmbeds
		}
		e := in.Cond[r][key]
		if e == nil {
			return nil, fmt.Errorf("wan: row %d lacks %s", r, key)
		}
		ehs[r] = e
		same = same && slices.Equal(e.Shape, ehs[0].Shape)
	}
	if same {
		all := make([]int, n)
		for r := range all {
			all[r] = r
		}
		return run(in.Latents, in.Timestep, ehs, all)
	}
	out := tensor.New(in.Latents.Shape...)
	per := in.Latents.Len() / n
	for r := range n {
		one, err := run(in.Latents.Rows(r, r+1), in.Timestep, ehs[r:r+1], []int{r})
		if err != nil {
			return nil, err
		}
		copy(out.Data[r*per:(r+1)*per], one.Data)
	}
	return out, nil
}

// run calls the transformer on latents [B, T, C, h, w] with one embedding per row (all of
// one shape), over the shard of cp when set, with First Block Cache when fb is set.
func (d *Denoiser) run(latents *tensor.Dense, t float32, ehs []*tensor.Dense, cp *cpCall, fb *transformer.FirstBlockCache) (*tensor.Dense, error) {
	b := latents.Shape[0]
	l, dim := embedShape(ehs[0])
	text := tensor.New(b, l, dim)
	for r, e := range ehs {
		copy(text.Data[r*l*dim:(r+1)*l*dim], e.Data)
	}
	hidden := SwapTC(latents)
	ts := tensor.New(b)
	if d.ExpandTimesteps {
		cfg := d.M.Config()
		s := hidden.Shape
		ts = tensor.New(b, (s[2]/cfg.PatchSize[0])*(s[3]/cfg.PatchSize[1])*(s[4]/cfg.PatchSize[2]))
	}
	for i := range ts.Data {
		ts.Data[i] = t
	}
	var out *tensor.Dense
	var err error
	switch {
	case cp == nil && fb == nil:
		out, err = d.M.Forward(hidden, ts, text, nil)
	case cp == nil:
		out, err = d.M.ForwardCached(hidden, ts, text, nil, *fb)
	case fb == nil:
		p := cp.part
		out, err = d.M.ForwardFrames(cp.ctx, hidden, ts, text, nil, transformer.Frames{Lo: p.Lo, Hi: p.Hi, Total: p.Total}, p.Comm)
	default:
		p := cp.part
		out, err = d.M.ForwardFramesCached(cp.ctx, hidden, ts, text, nil, transformer.Frames{Lo: p.Lo, Hi: p.Hi, Total: p.Total}, p.Comm, *fb)
	}
	if err != nil {
		return nil, err
	}
	if !slices.Equal(out.Shape, hidden.Shape) {
		return nil, fmt.Errorf("wan: the transformer returned %v for hidden states %v (latent sizes must be multiples of the patch size)", out.Shape, hidden.Shape)
	}
	return SwapTC(out), nil
}

// embedShape returns (L, text_dim) of an embedding [L, D] or [1, L, D].
func embedShape(e *tensor.Dense) (int, int) {
	s := e.Shape
	return s[len(s)-2], s[len(s)-1]
}

// SwapTC swaps axes 1 and 2 of a [B, A, B', H, W] tensor: the engine's [N, T, C, h, w]
// and diffusers' [B, C, F, h, w] are each other's swap.
func SwapTC(x *tensor.Dense) *tensor.Dense {
	s := x.Shape
	b, a1, a2, plane := s[0], s[1], s[2], s[3]*s[4]
	out := tensor.New(b, a2, a1, s[3], s[4])
	for n := range b {
		for i := range a1 {
			for j := range a2 {
				src := ((n*a1+i)*a2 + j) * plane
				dst := ((n*a2+j)*a1 + i) * plane
				copy(out.Data[dst:dst+plane], x.Data[src:src+plane])
			}
		}
	}
	return out
}
