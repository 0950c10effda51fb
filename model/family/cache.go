package family

import (
	"slices"
	"strings"

	"github.com/vdpp/vdpp/model/knob"
	"github.com/vdpp/vdpp/pipeline"
)

// Caching is what a family's denoisers can reuse between steps (Description.Caching,
// docs/caching.md). A family offers a mode when its denoisers implement model.StepCacher
// (and model.FrameStepCacher for context parallelism) for it: "fbcache" needs an adaptive
// rule (model.CacheAuto), "deepcache" DeepCache's skip branches, "static" any way of
// reusing a call (model.CacheReuse). The zero value offers none.
type Caching struct {
	// Modes are the pipeline.Cache modes the denoisers run, besides "none".
	Modes []string
}

// CacheCost is what caching costs and saves for one generation (CacheCoster): the
// planner cuts stages by it and weighs carrying the states against dropping them.
type CacheCost struct {
	// ReuseFraction is a call that reuses its cache, as a fraction of a full call's
	// cost (FLOPs): Wan's first block and output head of the whole transformer.
	ReuseFraction float64
	// StateBytes is one sample's state in one slot (one CFG branch of one expert): what a
	// hand-off carries per sample and branch when the cache travels.
	StateBytes int64
}

// CacheCoster is implemented by families that offer caching (Caching.Modes): the cost
// of rule on the folder dir for one sample's latent [T, C, h, w], from the configs alone.
type CacheCoster interface {
	CacheCost(dir string, rule pipeline.Cache, latent []int) (CacheCost, error)
}

// ResolveCache checks a run's cache rule against the resolved model and a run of steps
// steps and fills its defaults (Description.ResolveCache with the model's denoiser
// switches).
func (r Resolved) ResolveCache(c pipeline.Cache, steps int) (pipeline.Cache, error) {
	if !c.On() {
		return pipeline.Cache{}, nil
	}
	desc, err := r.Describe()
	if err != nil {
		return c, err
	}
	switches, err := r.Switches(steps)
	if err != nil {
		return c, err
	}
	return desc.ResolveCache(c, steps, switches, r.Family.Name())
}

// ResolveCache checks a run's cache rule against the model's caching and a run of steps
// steps whose denoiser changes at switches (each expert's first call computes), and fills
// its defaults (pipeline.Cache.Resolve): a mode the family does not offer is refused as
// one line naming those it does (fam names the family).
func (d Description) ResolveCache(c pipeline.Cache, steps int, switches []int, fam string) (pipeline.Cache, error) {
	if !c.On() {
		return pipeline.Cache{}, nil
	}
	if !slices.Contains(d.Caching.Modes, c.Mode) {
		offered := "no cache"
		if len(d.Caching.Modes) > 0 {
			offered = strings.Join(d.Caching.Modes, ", ")
		}
		if !slices.Contains(pipeline.CacheModes, c.Mode) {
			offered = strings.Join(pipeline.CacheModes, ", ")
		}
		return c, d.Knobs.Errorf("cache", "{cache} %s: the %s family offers %s", c.Mode, fam, offered).Mark(pipeline.ErrCache)
	}
	c, err := c.Resolve(steps, switches)
	if ke, ok := knob.AsError(err); ok {
		return c, ke.With(d.Knobs)
	}
	return c, err
}

// CacheCost returns the cost of rule on the resolved model for one sample's latent
// [T, C, h, w] (zero for a family that offers no caching, or no rule).
func (r Resolved) CacheCost(rule pipeline.Cache, latent []int) (CacheCost, error) {
	cc, ok := r.Family.(CacheCoster)
	if !ok || !rule.On() {
		return CacheCost{}, nil
	}
	return cc.CacheCost(r.Dir, rule, latent)
}

// CachedStagePlan is StagePlan for a run under rule on latents [T, C, h, w]: under a
// static rule the steps that reuse the cache cost their share of a full step
// (pipeline.Cache.StepCosts with CacheCost's ReuseFraction), so the stages are cut by
// computed work; otherwise it is StagePlan.
func (r Resolved) CachedStagePlan(rule pipeline.Cache, steps int, latent []int, stages int, extra []float64) ([]pipeline.Range, error) {
	if !rule.Static() {
		return r.StagePlan(steps, stages, extra)
	}
	cost, err := r.CacheCost(rule, latent)
	if err != nil {
		return nil, err
	}
	cuts, err := r.Switches(steps)
	if err != nil {
		return nil, err
	}
	return pipeline.CutStages(rule.StepCosts(steps, cuts, cost.ReuseFraction), stages, cuts, extra)
}

// LatentShape is one sample's latent [T, C, h, w] for p, from the folder's configs (the
// family opened with no role, which loads no weights).
func (r Resolved) LatentShape(p Params) ([]int, error) {
	s, err := r.Open(Options{})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return s.LatentShape(p), nil
}
