package wan

import (
	"context"
	"fmt"
	"math"

	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/wan/transformer"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/tensor"
)

// State names of a row's First Block Cache (model.CacheState), each [tokens, inner_dim]
// over the tokens the process holds.
const (
	// CacheFirstResidual is block 0's output minus its input at the row's last call that
	// ran every block: what the next call's first-block residual is compared with.
	CacheFirstResidual = "first_residual"
	// CacheRestResidual is the last block's output minus block 0's output at that call:
	// what stands in for blocks 1.. on a call that skips them.
	CacheRestResidual = "rest_residual"
)

var (
	_ model.StepCacher      = (*Denoiser)(nil)
	_ model.FrameStepCacher = (*Denoiser)(nil)
)

// PredictCached implements model.StepCacher with diffusers' First Block Cache
// (hooks/first_block_cache.py, v0.35.2), per row: block 0 runs; r = its output minus its
// input; with a state, value = mean|r - r_prev| / mean|r_prev|; the remaining blocks run
// when the row has no state, when asked (model.CacheCompute), or for model.CacheAuto when
// value > c.Threshold, and then r and their residual become the row's state; otherwise
// (model.CacheReuse, or a value at or below the threshold) block 0's output plus the
// cached residual goes to the output head and the state is kept, so later calls compare
// with the last call that computed. diffusers decides over a whole call's batch; here each
// row decides alone, which is the same for its batch of one and keeps a sample's bits
// independent of its batch.
func (d *Denoiser) PredictCached(ctx context.Context, in model.Input, c *model.CacheCall) (*tensor.Dense, error) {
	return d.predictCached(ctx, in, nil, c)
}

// PredictFramesCached implements model.FrameStepCacher: each member holds its tokens'
// states, and the indicator's sums per latent frame are all-gathered over the group, so
// every member adds the same numbers in frame order (as one rank does) and runs the same
// rows through the same exchanges.
func (d *Denoiser) PredictFramesCached(ctx context.Context, in model.Input, part model.FramePart, c *model.CacheCall) (*tensor.Dense, error) {
	if part.Comm == nil {
		return nil, fmt.Errorf("wan: PredictFramesCached without a group")
	}
	if in.Latents != nil && len(in.Latents.Shape) == 5 && in.Latents.Shape[1] != part.Hi-part.Lo {
		return nil, fmt.Errorf("wan: latents hold %d frames, the part [%d, %d) of %d", in.Latents.Shape[1], part.Lo, part.Hi, part.Total)
	}
	return d.predictCached(ctx, in, &cpCall{ctx: ctx, part: part}, c)
}

func (d *Denoiser) predictCached(ctx context.Context, in model.Input, cp *cpCall, c *model.CacheCall) (*tensor.Dense, error) {
	if len(c.Rows) != in.Rows() {
		return nil, fmt.Errorf("wan: %d cache rows for %d input rows", len(c.Rows), in.Rows())
	}
	return d.predict(ctx, in, func(cl call) (*tensor.Dense, error) {
		if cp != nil {
			cl.first += cp.part.Lo
		}
		fc := &firstBlockCall{ctx: ctx, c: c, rows: cl.rows, cp: cp, frameTokens: d.frameTokens(cl.latents)}
		return d.run(cl, cp, &transformer.FirstBlockCache{Decide: fc.decide, Ran: fc.ran})
	})
}

// frameTokens is the tokens of one latent patch-frame of latents [B, T, C, h, w].
func (d *Denoiser) frameTokens(latents *tensor.Dense) int {
	p := d.M.Config().PatchSize
	return (latents.Shape[3] / p[1]) * (latents.Shape[4] / p[2])
}

// firstBlockCall is one transformer call's First Block Cache: the call rows' cache rows.
type firstBlockCall struct {
	ctx         context.Context
	c           *model.CacheCall
	rows        []int // the cache row of each batch row
	cp          *cpCall
	frameTokens int
	first       []*tensor.Dense // each batch row's block-0 residual this call
}

// decide implements transformer.FirstBlockCache.Decide.
func (f *firstBlockCall) decide(x0, x1 *tensor.Dense) ([]bool, []*tensor.Dense, error) {
	b := x1.Shape[0]
	if b != len(f.rows) {
		return nil, nil, fmt.Errorf("wan: first block of %d rows for %d cache rows", b, len(f.rows))
	}
	per := x1.Len() / b
	frames := x1.Shape[1] / f.frameTokens
	f.first = make([]*tensor.Dense, b)
	// Per row and patch-frame: sum|r - r_prev| and sum|r_prev|.
	sums := tensor.New(b, frames, 2)
	for i, row := range f.rows {
		r := tensor.New(x1.Shape[1:]...)
		a, o := x0.Data[i*per:(i+1)*per], x1.Data[i*per:(i+1)*per]
		for j := range r.Data {
			r.Data[j] = o[j] - a[j]
		}
		f.first[i] = r
		if prev := f.c.Rows[row].State[CacheFirstResidual]; prev != nil && prev.Len() == per {
			model.ChangeSums(sums.Data[i*frames*2:(i+1)*frames*2], r.Data, prev.Data, frames)
		}
	}
	all := []*tensor.Dense{sums}
	if f.cp != nil {
		var err error
		if all, err = f.cp.part.Comm.AllGather(f.ctx, sums); err != nil {
			return nil, nil, fmt.Errorf("wan: first block cache indicator: %w", err)
		}
	}
	run := make([]bool, b)
	cached := make([]*tensor.Dense, b)
	for i, row := range f.rows {
		cr := &f.c.Rows[row]
		st := cr.State
		has := st[CacheFirstResidual] != nil && st[CacheFirstResidual].Len() == per && st[CacheRestResidual] != nil && st[CacheRestResidual].Len() == per
		cr.Value = math.NaN()
		if has {
			var err error
			if cr.Value, err = model.ChangeOf(all, i); err != nil {
				return nil, nil, fmt.Errorf("wan: %w", err)
			}
		}
		run[i] = !has || cr.Decision == model.CacheCompute || (cr.Decision == model.CacheAuto && !(cr.Value <= f.c.Threshold))
		cr.Computed = run[i]
		if !run[i] {
			cached[i] = st[CacheRestResidual]
		}
	}
	return run, cached, nil
}

// ran implements transformer.FirstBlockCache.Ran: the row's new state.
func (f *firstBlockCall) ran(i int, residual *tensor.Dense) {
	f.c.Rows[f.rows[i]].State = model.CacheState{CacheFirstResidual: f.first[i], CacheRestResidual: residual}
}

// Caching is what the Wan transformer reuses: First Block Cache, adaptively or on a
// static schedule of steps.
var Caching = family.Caching{Modes: []string{pipeline.CacheFB, pipeline.CacheStatic}}

// CacheCost implements family.CacheCoster: a reusing call runs the embeddings, block 0 and
// the output head (transformer.CallFLOPs), and a row's state is two residuals of the
// hidden states, [tokens, inner_dim] each.
func (wanFamily) CacheCost(dir string, _ pipeline.Cache, latent []int) (family.CacheCost, error) {
	f, err := Open(dir)
	if err != nil {
		return family.CacheCost{}, err
	}
	tc, err := f.TransformerConfig(1)
	if err != nil {
		return family.CacheCost{}, err
	}
	if len(latent) != 4 {
		return family.CacheCost{}, fmt.Errorf("wan: cache cost of latent %v, want [T, C, h, w]", latent)
	}
	pt := tc.PatchSize
	tokens := (latent[0] / pt[0]) * (latent[2] / pt[1]) * (latent[3] / pt[2])
	fl := transformer.CallFLOPs(tc, tokens, transformer.TextContextLen)
	full := fl.Embed + float64(tc.NumLayers)*fl.Block + fl.Head
	return family.CacheCost{ReuseFraction: (fl.Embed + fl.Block + fl.Head) / full,
		StateBytes: 2 * 4 * int64(tokens) * int64(tc.InnerDim())}, nil
}

var _ family.CacheCoster = wanFamily{}
