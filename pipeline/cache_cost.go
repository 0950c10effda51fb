package pipeline

import (
	"slices"

	"github.com/vdpp/vdpp/model"
)

// Planned reports whether a static rule (deepcache, static) computes step k in full: the
// steps it asks for, plus step 0 and every switch, where a denoiser's state is empty. With
// Drop a stage's first step computes too, which depends on the cut: see PlannedCosts.
func (c Cache) Planned(k int, switches []int) bool {
	if k == 0 || slices.Contains(switches, k) || !c.On() {
		return true
	}
	return c.Decision(k) == model.CacheCompute
}

// Static reports whether which steps compute is known before the run.
func (c Cache) Static() bool { return c.Mode == CacheDeep || c.Mode == CacheStatic }

// StepCosts returns each step's cost under a static rule, in full steps: 1 for a step
// that computes (Planned), reuse for one that reuses the cache (a family's reused call
// costs that fraction of a full one). Without a static rule every step costs 1.
func (c Cache) StepCosts(steps int, switches []int, reuse float64) []float64 {
	out := make([]float64, steps)
	for k := range out {
		out[k] = 1
		if c.Static() && !c.Planned(k, switches) {
			out[k] = reuse
		}
	}
	return out
}

// PlannedCosts is StepCosts for a run cut into stages: with Drop, a stage's first step
// computes in full (its states arrive empty).
func (c Cache) PlannedCosts(stages []Range, switches []int, reuse float64) []float64 {
	n := 0
	if len(stages) > 0 {
		n = stages[len(stages)-1].End
	}
	out := c.StepCosts(n, switches, reuse)
	if c.Drop {
		for _, r := range stages {
			if r.Start < n {
				out[r.Start] = 1
			}
		}
	}
	return out
}
