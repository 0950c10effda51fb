package pipeline

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/model/knob"
)

// ErrCache marks a step cache a run cannot take (one line naming the knob: a *knob.Error
// marked ErrCache, spelled by the surface that reports it).
var ErrCache = errors.New("pipeline: bad cache")

// cacheErr is a refusal of a cache rule naming the knob name.
func cacheErr(name, format string, args ...any) error {
	return knob.Errorf(name, format, args...).Mark(ErrCache)
}

// Cache modes (docs/caching.md).
const (
	// CacheNone computes every call in full.
	CacheNone = "none"
	// CacheFB is First Block Cache (diffusers' apply_first_block_cache): every call runs
	// the network's first block, and the rest only when the first block's residual moved
	// more than Threshold from the last computed call's; otherwise the rest's cached residual
	// stands in. Adaptive: which calls compute is known only as the run goes.
	CacheFB = "fbcache"
	// CacheDeep is DeepCache: every Interval-th step (step % Interval == 0) runs the whole
	// network, the others only its shallow part, with the deep features kept at Branch.
	CacheDeep = "deepcache"
	// CacheStatic computes in full exactly the steps of Steps (a calibrated step mask, or
	// every Interval-th step) and reuses the family's cache on the others, so each step's
	// cost is known before the run (the planner cuts stages by it).
	CacheStatic = "static"
)

// CacheModes are the modes a run can ask for, "none" first.
var CacheModes = []string{CacheNone, CacheFB, CacheDeep, CacheStatic}

// DefaultCacheThreshold is FBCache's threshold when none is given (diffusers'
// FirstBlockCacheConfig default); DefaultCacheInterval DeepCache's interval (its README's).
const (
	DefaultCacheThreshold = 0.05
	DefaultCacheInterval  = 3
)

// Cache says how a run reuses denoiser work between steps. It travels with every item
// (ItemCache.Rule), so each stage and server worker applies the same rule; the zero value
// computes everything. Its JSON names are the job parameters of the server's APIs.
type Cache struct {
	Mode string `json:"cache,omitempty"`
	// Threshold is FBCache's threshold on the first block's relative residual change.
	Threshold float64 `json:"cache_threshold,omitempty"`
	// Interval is DeepCache's (and a static mode's without Steps) every-k-th full step.
	Interval int `json:"cache_interval,omitempty"`
	// Branch is DeepCache's skip branch.
	Branch int `json:"cache_branch,omitempty"`
	// Steps are the steps a static mode computes in full, ascending.
	Steps []int `json:"cache_steps,omitempty"`
	// Drop drops the cache at every stage boundary instead of carrying it in the hand-off:
	// the hand-off is smaller and the stage's first call for each state computes.
	Drop bool `json:"cache_drop,omitempty"`
}

// On reports whether the rule caches at all.
func (c Cache) On() bool { return c.Mode != "" && c.Mode != CacheNone }

// String is the rule as flags would give it.
func (c Cache) String() string {
	if !c.On() {
		return CacheNone
	}
	s := c.Mode
	switch c.Mode {
	case CacheFB:
		s += " threshold " + strconv.FormatFloat(c.Threshold, 'g', -1, 64)
	case CacheDeep:
		s += fmt.Sprintf(" interval %d branch %d", c.Interval, c.Branch)
	case CacheStatic:
		s += " steps " + FormatSteps(c.Steps)
	}
	if c.Drop {
		s += " (dropped at stage boundaries)"
	}
	return s
}

// Resolve fills the mode's defaults (FBCache's threshold, DeepCache's interval, a static
// mode's steps from its interval) and checks the rule against a run of steps steps whose
// denoiser changes at switches (expert switches): an unknown mode, a threshold <= 0, an
// interval < 2, steps outside the run, or a run too short for the rule to skip any call
// are refused with one line naming the flag.
func (c Cache) Resolve(steps int, switches []int) (Cache, error) {
	if !c.On() {
		return Cache{}, nil
	}
	switch c.Mode {
	case CacheFB:
		if c.Threshold == 0 {
			c.Threshold = DefaultCacheThreshold
		}
		if !(c.Threshold > 0) || math.IsInf(c.Threshold, 0) {
			return c, cacheErr("cache_threshold", "{cache_threshold} %v must be > 0", c.Threshold)
		}
	case CacheDeep, CacheStatic:
		if c.Mode == CacheDeep && c.Interval == 0 {
			c.Interval = DefaultCacheInterval
		}
		if c.Interval < 0 || c.Interval == 1 {
			return c, cacheErr("cache_interval", "{cache_interval} %d must be >= 2 (1 computes every step)", c.Interval)
		}
		if c.Mode == CacheStatic && len(c.Steps) > 0 && c.Interval > 0 {
			return c, cacheErr("cache_steps", "{cache_steps} and {cache_interval} both given: give one")
		}
		if c.Mode == CacheStatic && len(c.Steps) == 0 && c.Interval == 0 {
			return c, cacheErr("cache", "{cache} static needs {cache_steps} (a calibration run's computed steps) or {cache_interval}")
		}
		if c.Mode == CacheStatic && c.Interval > 0 {
			for k := 0; k < steps; k += c.Interval {
				c.Steps = append(c.Steps, k)
			}
			c.Interval = 0
		}
	default:
		return c, cacheErr("cache", "{cache} %q (want one of %s)", c.Mode, strings.Join(CacheModes, ", "))
	}
	if c.Branch < 0 {
		return c, cacheErr("cache_branch", "{cache_branch} %d must be >= 0", c.Branch)
	}
	if c.Mode == CacheStatic {
		for i, k := range c.Steps {
			if k < 0 || k >= steps || (i > 0 && k <= c.Steps[i-1]) {
				return c, cacheErr("cache_steps", "{cache_steps} %s: want ascending steps in [0, %d)", FormatSteps(c.Steps), steps)
			}
		}
	}
	if c.Mode == CacheFB {
		if steps-1-len(inside(switches, steps)) < 1 {
			return c, cacheErr("cache", "{cache} %s on %d steps: every call is a denoiser's first, so nothing can be reused", c.Mode, steps)
		}
		return c, nil
	}
	full := 0
	for k := range steps {
		if c.Planned(k, switches) {
			full++
		}
	}
	if full == steps {
		return c, cacheErr("cache", "{cache} %s on %d steps computes every step: nothing to gain", c, steps)
	}
	return c, nil
}

// inside returns the switches strictly inside (0, steps).
func inside(switches []int, steps int) []int {
	var out []int
	for _, s := range switches {
		if s > 0 && s < steps {
			out = append(out, s)
		}
	}
	return out
}

// Decision is what the rule asks of every call of step k (Resolve must have filled it).
func (c Cache) Decision(k int) model.CacheDecision {
	switch c.Mode {
	case CacheFB:
		return model.CacheAuto
	case CacheDeep:
		if k%c.Interval == 0 {
			return model.CacheCompute
		}
		return model.CacheReuse
	case CacheStatic:
		if _, ok := slices.BinarySearch(c.Steps, k); ok {
			return model.CacheCompute
		}
		return model.CacheReuse
	}
	return model.CacheCompute
}

// ParseSteps parses a static schedule: step numbers and ranges a-b (inclusive), separated
// by commas ("0-2,5,9"), into ascending steps.
func ParseSteps(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(f, "-")
		a, err := strconv.Atoi(lo)
		b := a
		if err == nil && isRange {
			b, err = strconv.Atoi(hi)
		}
		if err != nil || a < 0 || b < a || b >= 1<<20 || len(out)+b-a > 1<<20 {
			return nil, fmt.Errorf("%w: --cache-steps %q: %q is not a step or a range a-b", ErrCache, s, f)
		}
		for k := a; k <= b; k++ {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// FormatSteps writes steps as ParseSteps reads them, runs as ranges ("0-2,5,9").
func FormatSteps(steps []int) string { return knob.FormatSteps(steps) }
