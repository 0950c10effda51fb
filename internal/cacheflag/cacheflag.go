// Package cacheflag is the step cache's command-line flags, shared by `vdpp generate`,
// `vdpp bench` and `vdpp plan`: --cache, --cache-threshold, --cache-interval,
// --cache-branch, --cache-steps and --cache-drop (docs/caching.md), their rendering as
// worker arguments, and the rule they give (pipeline.Cache).
//
// Contract: Rule checks what the flags alone can say (an unknown mode, a threshold <= 0,
// an interval < 2, a malformed or unreadable --cache-steps) as one line naming the flag;
// what depends on the model and the run (the modes a family offers, a run too short to
// gain) is family.Resolved.ResolveCache's.
package cacheflag

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/vdpp/vdpp/pipeline"
)

// Flags are the step cache's flags.
type Flags struct {
	Mode      string
	Threshold float64
	Interval  int
	Branch    int
	// Steps is a static schedule: a list of steps and ranges ("0-2,5,9"), or a
	// report.json of a calibration run whose cache.computed_steps it takes.
	Steps string
	Drop  bool
}

// Default are the flags' defaults: no cache; FBCache's and DeepCache's defaults for when a
// mode is chosen.
func Default() Flags {
	return Flags{Mode: pipeline.CacheNone, Threshold: pipeline.DefaultCacheThreshold, Interval: pipeline.DefaultCacheInterval}
}

// Register binds the flags to fs with f's values as defaults.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.Mode, "cache", f.Mode, "step cache: "+strings.Join(pipeline.CacheModes, ", ")+" (docs/caching.md)")
	fs.Float64Var(&f.Threshold, "cache-threshold", f.Threshold, "--cache fbcache: compute a call in full when the first block's residual moved more than this (relative) since the last computed call")
	fs.IntVar(&f.Interval, "cache-interval", f.Interval, "--cache deepcache: every k-th step in full; --cache static without --cache-steps: the same schedule")
	fs.IntVar(&f.Branch, "cache-branch", f.Branch, "--cache deepcache: the skip branch (how deep the reused part starts)")
	fs.StringVar(&f.Steps, "cache-steps", f.Steps, `--cache static: the steps that compute in full, "0-2,5,9", or a calibration run's report.json (its cache.computed_steps)`)
	fs.BoolVar(&f.Drop, "cache-drop", f.Drop, "drop the cache at stage boundaries instead of carrying it in the hand-off (each stage's first call computes)")
}

// Args renders the flags as arguments that Register parses back to f.
func (f Flags) Args() []string {
	return []string{"--cache=" + f.Mode, "--cache-threshold=" + strconv.FormatFloat(f.Threshold, 'g', -1, 64),
		"--cache-interval=" + strconv.Itoa(f.Interval), "--cache-branch=" + strconv.Itoa(f.Branch),
		"--cache-steps=" + f.Steps, "--cache-drop=" + strconv.FormatBool(f.Drop)}
}

// Rule returns the rule the flags give (the zero rule for none), with only the fields of
// its mode set.
func (f Flags) Rule() (pipeline.Cache, error) {
	switch f.Mode {
	case "", pipeline.CacheNone:
		return pipeline.Cache{}, nil
	case pipeline.CacheFB:
		if !(f.Threshold > 0) || math.IsInf(f.Threshold, 0) {
			return pipeline.Cache{}, fmt.Errorf("%w: --cache-threshold %v must be > 0", pipeline.ErrCache, f.Threshold)
		}
		return pipeline.Cache{Mode: f.Mode, Threshold: f.Threshold, Drop: f.Drop}, nil
	case pipeline.CacheDeep:
		if f.Interval < 2 {
			return pipeline.Cache{}, fmt.Errorf("%w: --cache-interval %d must be >= 2 (1 computes every step)", pipeline.ErrCache, f.Interval)
		}
		return pipeline.Cache{Mode: f.Mode, Interval: f.Interval, Branch: f.Branch, Drop: f.Drop}, nil
	case pipeline.CacheStatic:
		r := pipeline.Cache{Mode: f.Mode, Drop: f.Drop}
		if f.Steps == "" {
			if f.Interval < 2 {
				return pipeline.Cache{}, fmt.Errorf("%w: --cache-interval %d must be >= 2 (1 computes every step)", pipeline.ErrCache, f.Interval)
			}
			r.Interval = f.Interval
			return r, nil
		}
		steps, err := ParseSteps(f.Steps)
		if err != nil {
			return pipeline.Cache{}, err
		}
		r.Steps = steps
		return r, nil
	}
	return pipeline.Cache{}, fmt.Errorf("%w: --cache %q (want one of %s)", pipeline.ErrCache, f.Mode, strings.Join(pipeline.CacheModes, ", "))
}

// ParseSteps reads --cache-steps: a list ("0-2,5,9") or a report.json of a cached run
// (`vdpp generate --cache fbcache` writes cache.computed_steps).
func ParseSteps(s string) ([]int, error) {
	if !strings.HasSuffix(s, ".json") {
		return pipeline.ParseSteps(s)
	}
	b, err := os.ReadFile(s)
	if err != nil {
		return nil, fmt.Errorf("%w: --cache-steps: %w", pipeline.ErrCache, err)
	}
	var rep struct {
		Cache *struct {
			ComputedSteps *string `json:"computed_steps"`
		} `json:"cache"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("%w: --cache-steps %s: %w", pipeline.ErrCache, s, err)
	}
	if rep.Cache == nil || rep.Cache.ComputedSteps == nil {
		return nil, fmt.Errorf("%w: --cache-steps %s holds no cache.computed_steps (a report.json of a cached run has them)", pipeline.ErrCache, s)
	}
	steps, err := pipeline.ParseSteps(*rep.Cache.ComputedSteps)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, s)
	}
	return slices.Clip(steps), nil
}
