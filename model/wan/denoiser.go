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
// to the batch (per token with expand_timesteps), as WanPipeline calls it. A row with image
// conditioning (KeyCondition, KeyImageEmbeds) is called as WanImageToVideoPipeline calls
// it: the condition's frames concatenated after the latent's channels, or, with
// expand_timesteps, standing in for latent frame 0 with timestep 0 on its tokens; the image
// embeddings (the same for both CFG halves) as encoder_hidden_states_image.
type Denoiser struct {
	M               *transformer.Model
	ExpandTimesteps bool
}

var (
	_ model.Denoiser       = (*Denoiser)(nil)
	_ model.LatentFinisher = (*Denoiser)(nil)
)

// WeightBytes implements model.Denoiser.
func (d *Denoiser) WeightBytes() int64 { return d.M.WeightBytes() }

// Predict implements model.Denoiser. Rows whose embeddings have the same length run in
// one transformer call; otherwise each row runs alone.
func (d *Denoiser) Predict(ctx context.Context, in model.Input) (*tensor.Dense, error) {
	return d.predict(ctx, in, func(c call) (*tensor.Dense, error) {
		return d.run(c, nil, nil)
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
	return d.predict(ctx, in, func(c call) (*tensor.Dense, error) {
		c.first += part.Lo
		return d.run(c, &cpCall{ctx: ctx, part: part}, nil)
	})
}

// FinishLatent implements model.LatentFinisher: with expand_timesteps, a row conditioned on
// an image gets the image's latents back in frame 0 of its final latent [T, C, h, w], as
// WanImageToVideoPipeline does after its last step.
func (d *Denoiser) FinishLatent(cond model.Conditioning, latent *tensor.Dense) error {
	c := cond[KeyCondition]
	if !d.ExpandTimesteps || c == nil {
		return nil
	}
	if len(latent.Shape) != 4 || c.Len() != tensor.NumElements(latent.Shape[1:]) {
		return fmt.Errorf("wan: the image latents %v do not fit a frame of latent %v", c.Shape, latent.Shape)
	}
	copy(latent.Data, c.Data)
	return nil
}

var _ model.ContextParallel = (*Denoiser)(nil)

// cpCall is a context-parallel transformer call's shard and group.
type cpCall struct {
	ctx  context.Context
	part model.FramePart
}

// call is one transformer call: the rows' latents [B, T, C, h, w] (frames [first, first+T)
// of the whole sample), the step's timestep, and each row's text embeddings, image
// embeddings and condition (nil where the row has none); rows are their indices in the
// model.Input.
type call struct {
	latents *tensor.Dense
	t       float32
	first   int
	ehs     []*tensor.Dense
	images  []*tensor.Dense
	conds   []*tensor.Dense
	rows    []int
}

// predict gathers each row's conditioning and calls run on rows of equal embedding length.
func (d *Denoiser) predict(ctx context.Context, in model.Input, run func(c call) (*tensor.Dense, error)) (*tensor.Dense, error) {
	if err := in.Validate(); err != nil {
		return nil, fmt.Errorf("wan: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n := in.Rows()
	c := call{latents: in.Latents, t: in.Timestep, first: in.FirstFrame,
		ehs: make([]*tensor.Dense, n), images: make([]*tensor.Dense, n), conds: make([]*tensor.Dense, n)}
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
		c.ehs[r] = e
		c.images[r] = in.Cond[r][KeyImageEmbeds]
		c.conds[r] = in.Cond[r][KeyCondition]
		same = same && slices.Equal(e.Shape, c.ehs[0].Shape)
	}
	if same {
		c.rows = make([]int, n)
		for r := range c.rows {
			c.rows[r] = r
		}
		return run(c)
	}
	out := tensor.New(in.Latents.Shape...)
	per := in.Latents.Len() / n
	for r := range n {
		one := c
		one.latents = in.Latents.Rows(r, r+1)
		one.ehs, one.images, one.conds, one.rows = c.ehs[r:r+1], c.images[r:r+1], c.conds[r:r+1], []int{r}
		y, err := run(one)
		if err != nil {
			return nil, err
		}
		copy(out.Data[r*per:(r+1)*per], y.Data)
	}
	return out, nil
}

// run calls the transformer on c, over the shard of cp when set, with First Block Cache
// when fb is set.
func (d *Denoiser) run(c call, cp *cpCall, fb *transformer.FirstBlockCache) (*tensor.Dense, error) {
	latents := c.latents
	b := latents.Shape[0]
	l, dim := embedShape(c.ehs[0])
	text := tensor.New(b, l, dim)
	for r, e := range c.ehs {
		copy(text.Data[r*l*dim:(r+1)*l*dim], e.Data)
	}
	hidden := SwapTC(latents)
	cfg := d.M.Config()
	s := hidden.Shape
	ts := tensor.New(b)
	frameTokens := (s[3] / cfg.PatchSize[1]) * (s[4] / cfg.PatchSize[2])
	if d.ExpandTimesteps {
		ts = tensor.New(b, (s[2]/cfg.PatchSize[0])*frameTokens)
	}
	for i := range ts.Data {
		ts.Data[i] = c.t
	}
	var err error
	if hidden, err = d.condition(hidden, ts, c, frameTokens); err != nil {
		return nil, err
	}
	image, err := d.imageEmbeds(c.images)
	if err != nil {
		return nil, err
	}
	var out *tensor.Dense
	switch {
	case cp == nil && fb == nil:
		out, err = d.M.Forward(hidden, ts, text, image)
	case cp == nil:
		out, err = d.M.ForwardCached(hidden, ts, text, image, *fb)
	case fb == nil:
		p := cp.part
		out, err = d.M.ForwardFrames(cp.ctx, hidden, ts, text, image, transformer.Frames{Lo: p.Lo, Hi: p.Hi, Total: p.Total}, p.Comm)
	default:
		p := cp.part
		out, err = d.M.ForwardFramesCached(cp.ctx, hidden, ts, text, image, transformer.Frames{Lo: p.Lo, Hi: p.Hi, Total: p.Total}, p.Comm, *fb)
	}
	if err != nil {
		return nil, err
	}
	if want := latents.Shape; out.Shape[0] != want[0] || out.Shape[1] != want[2] || out.Shape[2] != want[1] || out.Shape[3] != want[3] || out.Shape[4] != want[4] {
		return nil, fmt.Errorf("wan: the transformer returned %v for latents %v (latent sizes must be multiples of the patch size)", out.Shape, latents.Shape)
	}
	return SwapTC(out), nil
}

// condition applies the rows' image conditions to hidden [B, z, T, h, w] (frames
// [c.first, c.first+T) of the sample): WanImageToVideoPipeline's channels concatenated
// after the latents, or with expand_timesteps the image latents standing in for frame 0,
// whose tokens get timestep 0 in ts [B, tokens]. Rows without a condition are left as they
// are; a transformer that needs more channels than the rows carry is an error.
func (d *Denoiser) condition(hidden, ts *tensor.Dense, c call, frameTokens int) (*tensor.Dense, error) {
	cfg := d.M.Config()
	s := hidden.Shape
	b, z, t, hw := s[0], s[1], s[2], s[3]*s[4]
	any := false
	for _, cd := range c.conds {
		any = any || cd != nil
	}
	if d.ExpandTimesteps {
		if !any || c.first > 0 {
			return hidden, nil
		}
		for r, cd := range c.conds {
			if cd == nil {
				continue
			}
			if cd.Len() != z*hw {
				return nil, fmt.Errorf("wan: row %d: image latents %v for latents [%d, %d, %d, %d]", c.rows[r], cd.Shape, z, t, s[3], s[4])
			}
			for ch := range z {
				copy(hidden.Data[((r*z+ch)*t)*hw:((r*z+ch)*t+1)*hw], cd.Data[ch*hw:(ch+1)*hw])
			}
			row := ts.Data[r*ts.Shape[1] : (r+1)*ts.Shape[1]]
			for i := range frameTokens {
				row[i] = 0
			}
		}
		return hidden, nil
	}
	if cfg.InChannels == z {
		if any {
			return nil, fmt.Errorf("wan: an image condition for a transformer that takes the latents alone (in_channels %d, %s)", cfg.InChannels, cfg.Path)
		}
		return hidden, nil
	}
	extra := cfg.InChannels - z
	out := tensor.New(b, cfg.InChannels, t, s[3], s[4])
	for r := range b {
		cd := c.conds[r]
		if cd == nil {
			return nil, fmt.Errorf("wan: row %d has no image condition; the transformer takes %d channels, the latents are %d (the model is image-to-video, %s)", c.rows[r], cfg.InChannels, z, cfg.Path)
		}
		if len(cd.Shape) != 4 || cd.Shape[0] != extra || cd.Shape[2] != s[3] || cd.Shape[3] != s[4] || c.first+t > cd.Shape[1] {
			return nil, fmt.Errorf("wan: row %d: condition %v for frames [%d, %d) of latents [%d, %d, ·, %d, %d] (the transformer takes %d extra channels)",
				c.rows[r], cd.Shape, c.first, c.first+t, b, z, s[3], s[4], extra)
		}
		copy(out.Data[r*cfg.InChannels*t*hw:], hidden.Data[r*z*t*hw:(r+1)*z*t*hw])
		base := (r*cfg.InChannels + z) * t * hw
		for ch := range extra {
			src := cd.Data[(ch*cd.Shape[1]+c.first)*hw : (ch*cd.Shape[1]+c.first+t)*hw]
			copy(out.Data[base+ch*t*hw:], src)
		}
	}
	return out, nil
}

// imageEmbeds stacks the rows' image embeddings [k, S, D] into the transformer's
// encoder_hidden_states_image [B·k, S, D]; nil when no row has any.
func (d *Denoiser) imageEmbeds(images []*tensor.Dense) (*tensor.Dense, error) {
	if images[0] == nil {
		for r, im := range images {
			if im != nil {
				return nil, fmt.Errorf("wan: row %d has image embeddings, row 0 none", r)
			}
		}
		return nil, nil
	}
	sh := images[0].Shape
	if len(sh) == 2 {
		sh = append([]int{1}, sh...)
	}
	per := images[0].Len()
	out := tensor.New(append([]int{len(images) * sh[0]}, sh[1:]...)...)
	for r, im := range images {
		if im == nil || im.Len() != per {
			return nil, fmt.Errorf("wan: row %d: image embeddings %v, row 0 has %v", r, shapeOrNil(im), images[0].Shape)
		}
		copy(out.Data[r*per:], im.Data)
	}
	return out, nil
}

func shapeOrNil(t *tensor.Dense) []int {
	if t == nil {
		return nil
	}
	return t.Shape
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
