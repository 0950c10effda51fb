package svd

import (
	"context"
	"fmt"
	"math"

	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/model/checkpoint"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/svd/unet"
	"github.com/vdpp/vdpp/model/svd/unetcost"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/sched"
	"github.com/vdpp/vdpp/tensor"
)

// State names of a row's step cache (model.CacheState), each over the frames the process
// holds.
const (
	// CacheFeature is DeepCache's kept feature, [1, T, C, h', w']: the input of the up
	// module that consumes the branch's skip at the row's last full call.
	CacheFeature = "deep_feature"
	// CacheDenoised is the denoised estimate x̂0 of the row's last full call, [1, T, C, h, w]:
	// what a call that reuses the whole UNet turns into its output at the new noise level.
	CacheDenoised = "denoised"
	// CacheProbe is the UNet's first block (its layers down to the branch's skip) at the
	// row's last full call, [1, T, C, h', w']: what the adaptive rule compares with.
	CacheProbe = "probe"
)

// Caching is what SVD's UNet reuses between steps (docs/caching.md):
//   - deepcache: DeepCache, every Interval-th step runs the whole UNet and keeps the
//     feature at Branch, the others run only the layers above the branch
//     (unet.Model.ForwardShallow);
//   - static: on a fixed list of steps the whole UNet runs, the other steps run none of it
//     and carry the last full call's denoised estimate to their noise level;
//   - fbcache: every call runs the UNet's first block (down to Branch's skip); the rest
//     runs from it (unet.Model.ForwardRest) when the first block moved more than Threshold
//     (mean |p - p_prev| / mean |p_prev|) since the last full call, else the call is
//     reused whole as for static.
var Caching = family.Caching{Modes: []string{pipeline.CacheDeep, pipeline.CacheStatic, pipeline.CacheFB}}

var (
	_ model.StepCacher      = (*Denoiser)(nil)
	_ model.FrameStepCacher = (*Denoiser)(nil)
)

// PredictCached implements model.StepCacher. Each row decides alone, from its own input
// and state: a row computes the whole UNet when it has no usable state, when asked
// (model.CacheCompute), or for model.CacheAuto when the first block's indicator exceeds
// c.Threshold; otherwise it reuses (Caching says how, by c.Mode). Rows that compute run
// as one UNet call, rows that reuse DeepCache's feature as another.
func (d *Denoiser) PredictCached(ctx context.Context, in model.Input, c *model.CacheCall) (*tensor.Dense, error) {
	return d.predictCached(ctx, in, c, oneRank{d.P.UNet})
}

// PredictFramesCached implements model.FrameStepCacher: each member's states cover its
// frames, and the adaptive rule's sums per frame are all-gathered over the group, so every
// member adds the same numbers in frame order (as one rank does) and runs the same rows
// through the same exchanges.
func (d *Denoiser) PredictFramesCached(ctx context.Context, in model.Input, part model.FramePart, c *model.CacheCall) (*tensor.Dense, error) {
	if part.Comm == nil {
		return nil, fmt.Errorf("svd: PredictFramesCached without a group")
	}
	if in.Latents != nil && len(in.Latents.Shape) == 5 && in.Latents.Shape[1] != part.Hi-part.Lo {
		return nil, fmt.Errorf("svd: latents hold %d frames, the part [%d, %d) of %d", in.Latents.Shape[1], part.Lo, part.Hi, part.Total)
	}
	return d.predictCached(ctx, in, c, member{m: d.P.UNet, ctx: ctx, part: part})
}

// unetCalls are the UNet's calls on one rank or one context-parallel member.
type unetCalls interface {
	full(sample, ts, ehs, ids *tensor.Dense) (*tensor.Dense, error)
	keep(branch int, sample, ts, ehs, ids *tensor.Dense) (out, feature *tensor.Dense, err error)
	shallow(branch int, feature, sample, ts, ehs, ids *tensor.Dense) (*tensor.Dense, error)
	probe(branch int, sample, ts, ehs, ids *tensor.Dense) ([]*tensor.Dense, error)
	rest(branch int, skips []*tensor.Dense, sample, ts, ehs, ids *tensor.Dense) (*tensor.Dense, error)
	// gather returns every member's per-frame sums, in member order.
	gather(sums *tensor.Dense) ([]*tensor.Dense, error)
}

type oneRank struct{ m *unet.Model }

func (o oneRank) full(sample, ts, ehs, ids *tensor.Dense) (*tensor.Dense, error) {
	return o.m.Forward(sample, ts, ehs, ids)
}

func (o oneRank) keep(branch int, sample, ts, ehs, ids *tensor.Dense) (*tensor.Dense, *tensor.Dense, error) {
	return o.m.ForwardKeep(branch, sample, ts, ehs, ids)
}

func (o oneRank) shallow(branch int, feature, sample, ts, ehs, ids *tensor.Dense) (*tensor.Dense, error) {
	return o.m.ForwardShallow(branch, feature, sample, ts, ehs, ids)
}

func (o oneRank) probe(branch int, sample, ts, ehs, ids *tensor.Dense) ([]*tensor.Dense, error) {
	return o.m.ForwardProbe(branch, sample, ts, ehs, ids)
}

func (o oneRank) rest(branch int, skips []*tensor.Dense, sample, ts, ehs, ids *tensor.Dense) (*tensor.Dense, error) {
	return o.m.ForwardRest(branch, skips, sample, ts, ehs, ids)
}

func (oneRank) gather(sums *tensor.Dense) ([]*tensor.Dense, error) { return []*tensor.Dense{sums}, nil }

type member struct {
	m    *unet.Model
	ctx  context.Context
	part model.FramePart
}

func (c member) frames() unet.Frames {
	return unet.Frames{Lo: c.part.Lo, Hi: c.part.Hi, Total: c.part.Total}
}

func (c member) full(sample, ts, ehs, ids *tensor.Dense) (*tensor.Dense, error) {
	return c.m.ForwardFrames(c.ctx, sample, ts, ehs, ids, c.frames(), c.part.Comm)
}

func (c member) keep(branch int, sample, ts, ehs, ids *tensor.Dense) (*tensor.Dense, *tensor.Dense, error) {
	return c.m.ForwardFramesKeep(c.ctx, branch, sample, ts, ehs, ids, c.frames(), c.part.Comm)
}

func (c member) shallow(branch int, feature, sample, ts, ehs, ids *tensor.Dense) (*tensor.Dense, error) {
	return c.m.ForwardFramesShallow(c.ctx, branch, feature, sample, ts, ehs, ids, c.frames(), c.part.Comm)
}

func (c member) probe(branch int, sample, ts, ehs, ids *tensor.Dense) ([]*tensor.Dense, error) {
	return c.m.ForwardFramesProbe(c.ctx, branch, sample, ts, ehs, ids, c.frames(), c.part.Comm)
}

func (c member) rest(branch int, skips []*tensor.Dense, sample, ts, ehs, ids *tensor.Dense) (*tensor.Dense, error) {
	return c.m.ForwardFramesRest(c.ctx, branch, skips, sample, ts, ehs, ids, c.frames(), c.part.Comm)
}

func (c member) gather(sums *tensor.Dense) ([]*tensor.Dense, error) {
	all, err := c.part.Comm.AllGather(c.ctx, sums)
	if err != nil {
		return nil, fmt.Errorf("svd: step cache indicator: %w", err)
	}
	return all, nil
}

// cacheNeeds returns the state a row needs to reuse under mode, and what a full call of
// that mode keeps.
func cacheNeeds(mode string, decision model.CacheDecision) []string {
	switch {
	case mode == pipeline.CacheDeep:
		return []string{CacheFeature}
	case decision == model.CacheAuto || mode == pipeline.CacheFB:
		return []string{CacheProbe, CacheDenoised}
	}
	return []string{CacheDenoised}
}

func (d *Denoiser) predictCached(ctx context.Context, in model.Input, c *model.CacheCall, u unetCalls) (*tensor.Dense, error) {
	n := in.Rows()
	if len(c.Rows) != n {
		return nil, fmt.Errorf("svd: %d cache rows for %d input rows", len(c.Rows), n)
	}
	sample, ts, ehs, ids, err := d.unetInputs(ctx, in)
	if err != nil {
		return nil, err
	}
	if in.Sigma <= 0 {
		return nil, fmt.Errorf("svd: step cache at sigma %v", in.Sigma)
	}
	per := in.Latents.Len() / n
	frames := in.Latents.Shape[1]

	// Which rows could reuse: those with every tensor their mode needs, of the right size.
	has := make([]bool, n)
	auto := false
	for r, row := range c.Rows {
		has[r] = true
		for _, name := range cacheNeeds(c.Mode, row.Decision) {
			t := row.State[name]
			has[r] = has[r] && t != nil && len(t.Shape) == 5 && t.Shape[0] == 1 && t.Shape[1] == frames
		}
		if t := row.State[CacheDenoised]; t != nil && t.Len() != per {
			has[r] = false
		}
		auto = auto || row.Decision == model.CacheAuto
	}

	// The adaptive rule: every row's first block (the last of the probe's skips), and its
	// indicator against the state's; rows that compute continue from the probe.
	var skips []*tensor.Dense
	var probes *tensor.Dense
	if auto {
		if skips, err = u.probe(c.Branch, sample, ts, ehs, ids); err != nil {
			return nil, err
		}
		probes = skips[len(skips)-1]
		if err := indicators(c, probes, has, u); err != nil {
			return nil, err
		}
	}
	var computeRows, deepRows, wholeRows []int
	for r := range c.Rows {
		row := &c.Rows[r]
		if row.Decision != model.CacheAuto {
			row.Value = math.NaN()
		}
		row.Computed = !has[r] || row.Decision == model.CacheCompute || (row.Decision == model.CacheAuto && !(row.Value <= c.Threshold))
		switch {
		case row.Computed:
			computeRows = append(computeRows, r)
		case c.Mode == pipeline.CacheDeep:
			deepRows = append(deepRows, r)
		default:
			wholeRows = append(wholeRows, r)
		}
	}

	out := tensor.New(in.Latents.Shape...)
	pred := d.P.Sched.PredictionType
	sigma := float64(in.Sigma)
	if len(computeRows) > 0 {
		s, e, i := sample.GatherRows(computeRows), ehs.GatherRows(computeRows), ids.GatherRows(computeRows)
		var res, features *tensor.Dense
		switch {
		case c.Mode == pipeline.CacheDeep:
			res, features, err = u.keep(c.Branch, s, ts, e, i)
		case skips != nil:
			picked := make([]*tensor.Dense, len(skips))
			for k, x := range skips {
				picked[k] = x.GatherRows(computeRows)
			}
			res, err = u.rest(c.Branch, picked, s, ts, e, i)
		default:
			res, err = u.full(s, ts, e, i)
		}
		if err != nil {
			return nil, err
		}
		for j, r := range computeRows {
			o := out.Data[r*per : (r+1)*per]
			copy(o, res.Data[j*per:(j+1)*per])
			st := model.CacheState{}
			switch {
			case features != nil:
				st[CacheFeature] = features.Rows(j, j+1).Clone()
			default:
				x0 := tensor.New(append([]int{1}, in.Latents.Shape[1:]...)...)
				denoised(pred, x0.Data, o, in.Latents.Data[r*per:(r+1)*per], sigma)
				st[CacheDenoised] = x0
				if probes != nil {
					st[CacheProbe] = probes.Rows(r, r+1).Clone()
				}
			}
			c.Rows[r].State = st
		}
	}
	if len(deepRows) > 0 {
		fs := make([]*tensor.Dense, len(deepRows))
		for j, r := range deepRows {
			fs[j] = c.Rows[r].State[CacheFeature]
		}
		feature, err := tensor.ConcatRows(fs)
		if err != nil {
			return nil, fmt.Errorf("svd: deepcache features: %w", err)
		}
		res, err := u.shallow(c.Branch, feature, sample.GatherRows(deepRows), ts, ehs.GatherRows(deepRows), ids.GatherRows(deepRows))
		if err != nil {
			return nil, err
		}
		for j, r := range deepRows {
			copy(out.Data[r*per:(r+1)*per], res.Data[j*per:(j+1)*per])
		}
	}
	for _, r := range wholeRows {
		fromDenoised(pred, out.Data[r*per:(r+1)*per], c.Rows[r].State[CacheDenoised].Data, in.Latents.Data[r*per:(r+1)*per], sigma)
	}
	return out, nil
}

// indicators sets each Auto row's Value: mean |p - p_prev| / mean |p_prev| of its first
// block against its state's, from per-frame sums gathered over the members (one rank: its
// own), added in frame order.
func indicators(c *model.CacheCall, probes *tensor.Dense, has []bool, u unetCalls) error {
	n, frames := probes.Shape[0], probes.Shape[1]
	perFrame := probes.Len() / (n * frames)
	sums := tensor.New(n, frames, 2)
	for r, row := range c.Rows {
		prev := row.State[CacheProbe]
		if !has[r] || prev == nil || prev.Len() != perFrame*frames {
			has[r] = false
			continue
		}
		model.ChangeSums(sums.Data[r*frames*2:(r+1)*frames*2], probes.Data[r*frames*perFrame:(r+1)*frames*perFrame], prev.Data, frames)
	}
	all, err := u.gather(sums)
	if err != nil {
		return err
	}
	for r := range c.Rows {
		row := &c.Rows[r]
		row.Value = math.NaN()
		if row.Decision != model.CacheAuto || !has[r] {
			continue
		}
		for _, s := range all {
			if len(s.Shape) != 3 || s.Shape[0] != n {
				return fmt.Errorf("svd: step cache indicator sums %v for %d rows", s.Shape, n)
			}
		}
		if row.Value, err = model.ChangeOf(all, r); err != nil {
			return fmt.Errorf("svd: %w", err)
		}
	}
	return nil
}

// denoised writes into x0 the denoised estimate of a model output out for the scaled
// input xin = x / √(σ²+1) at noise level sigma, as the Euler scheduler forms it.
func denoised(pred string, x0, out, xin []float32, sigma float64) {
	c := math.Sqrt(sigma*sigma + 1)
	for i, v := range out {
		switch pred {
		case sched.PredVPrediction:
			x0[i] = float32((float64(xin[i]) - sigma*float64(v)) / c)
		case sched.PredEpsilon:
			x0[i] = float32(float64(xin[i])*c - sigma*float64(v))
		default:
			x0[i] = v
		}
	}
}

// fromDenoised is the inverse of denoised: the model output whose denoised estimate at
// sigma, for the scaled input xin, is x0.
func fromDenoised(pred string, out, x0, xin []float32, sigma float64) {
	c := math.Sqrt(sigma*sigma + 1)
	for i, v := range x0 {
		switch pred {
		case sched.PredVPrediction:
			out[i] = float32((float64(xin[i]) - c*float64(v)) / sigma)
		case sched.PredEpsilon:
			out[i] = float32((float64(xin[i])*c - float64(v)) / sigma)
		default:
			out[i] = v
		}
	}
}

// CacheCost implements family.CacheCoster from the UNet's config (unetcost): a DeepCache
// call that reuses runs the layers above the branch and keeps the feature there; a static
// reuse runs no layer and keeps the last denoised estimate; the adaptive rule's reuse runs
// the first block and keeps it beside the denoised estimate.
func (svdFamily) CacheCost(dir string, rule pipeline.Cache, lat []int) (family.CacheCost, error) {
	ck, err := checkpoint.Open(dir)
	if err != nil {
		return family.CacheCost{}, err
	}
	ucfg, err := unet.ReadConfig(ck)
	if err != nil {
		return family.CacheCost{}, err
	}
	if err := checkCacheBranch(ucfg, rule); err != nil {
		return family.CacheCost{}, err
	}
	if len(lat) != 4 {
		return family.CacheCost{}, fmt.Errorf("svd: cache cost of latent %v, want [T, C, h, w]", lat)
	}
	s := unetcost.Shape{Batch: 1, Frames: max(lat[0], 1), Height: max(lat[2], 1), Width: max(lat[3], 1)}
	whole, err := unetcost.Count(ucfg, s)
	if err != nil {
		return family.CacheCost{}, err
	}
	latent := int64(4 * s.Frames * s.Height * s.Width * ucfg.OutChannels)
	switch rule.Mode {
	case pipeline.CacheDeep:
		part, err := unetcost.CountPart(ucfg, s, unetcost.Shallow, rule.Branch)
		if err != nil {
			return family.CacheCost{}, err
		}
		return family.CacheCost{ReuseFraction: part.Total / whole.Total, StateBytes: int64(part.CutBytes)}, nil
	case pipeline.CacheFB:
		part, err := unetcost.CountPart(ucfg, s, unetcost.Probe, rule.Branch)
		if err != nil {
			return family.CacheCost{}, err
		}
		return family.CacheCost{ReuseFraction: part.Total / whole.Total, StateBytes: int64(part.CutBytes) + latent}, nil
	}
	return family.CacheCost{StateBytes: latent}, nil
}

var _ family.CacheCoster = svdFamily{}
