package pipeline

import (
	"encoding/json"
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
func FormatSteps(steps []int) string {
	var b strings.Builder
	for i := 0; i < len(steps); {
		j := i
		for j+1 < len(steps) && steps[j+1] == steps[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(steps[i]))
		if j > i {
			b.WriteString("-" + strconv.Itoa(steps[j]))
		}
		i = j + 1
	}
	return b.String()
}

// CFG branches of cache slots: the conditional and unconditional calls of a guided step
// keep separate states (as diffusers' cache_context("cond") / ("uncond")); an unguided
// call is "cond".
const (
	BranchCond   = "cond"
	BranchUncond = "uncond"
)

// CacheSlotKey names one slot of an item's cache: a temporal window and a CFG branch.
type CacheSlotKey struct {
	Window int
	Branch string
}

// CacheSlot is one slot's per-row states and the expert they belong to: a call on another
// expert finds no state (each expert keeps its own cache, so an expert's first call
// computes).
type CacheSlot struct {
	Expert int
	Rows   []model.CacheState
}

// CacheRecord is one denoiser call of one sample: its step, expert, CFG branch and window,
// whether it computed in full, the adaptive rule's indicator (NaN when none), and for a
// call that reused its state the relative change of the denoiser's input latent since the
// call that computed that state, |x - x_ref| / |x_ref| (L2; NaN for a computing call):
// how far the input has moved from where the reused work was done, an estimate of what
// the reuse costs in quality.
type CacheRecord struct {
	Step     int
	Expert   int
	Branch   string
	Window   int
	Computed bool
	Value    float32
	Change   float32
}

// cacheRecordJSON is a CacheRecord's JSON: value and latent_change null when NaN.
type cacheRecordJSON struct {
	Step     int      `json:"step"`
	Expert   int      `json:"expert,omitempty"`
	Branch   string   `json:"branch"`
	Window   int      `json:"window,omitempty"`
	Computed bool     `json:"computed"`
	Value    *float64 `json:"value"`
	Change   *float64 `json:"latent_change,omitempty"`
}

// MarshalJSON writes the record with its value null when there was none, and its
// latent change when it reused.
func (r CacheRecord) MarshalJSON() ([]byte, error) {
	out := cacheRecordJSON{Step: r.Step, Expert: r.Expert, Branch: r.Branch, Window: r.Window, Computed: r.Computed}
	if v := float64(r.Value); !math.IsNaN(v) {
		out.Value = &v
	}
	if v := float64(r.Change); !math.IsNaN(v) && !r.Computed {
		out.Change = &v
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads what MarshalJSON writes (null or absent numbers as NaN).
func (r *CacheRecord) UnmarshalJSON(data []byte) error {
	var in cacheRecordJSON
	if err := json.Unmarshal(data, &in); err != nil {
		return err
	}
	*r = CacheRecord{Step: in.Step, Expert: in.Expert, Branch: in.Branch, Window: in.Window, Computed: in.Computed,
		Value: float32(math.NaN()), Change: float32(math.NaN())}
	if in.Value != nil {
		r.Value = float32(*in.Value)
	}
	if in.Change != nil {
		r.Change = float32(*in.Change)
	}
	return nil
}

// ItemCache is an item's step cache: the rule, each slot's per-row states, and each
// sample's record of calls (Log[row], in call order). It travels with the item (ToMessage;
// without the states when Rule.Drop).
type ItemCache struct {
	Rule  Cache
	Slots map[CacheSlotKey]*CacheSlot
	Log   [][]CacheRecord
}

// NewItemCache returns an empty cache of rows rows under rule (nil when the rule is off).
func NewItemCache(rule Cache, rows int) *ItemCache {
	if !rule.On() {
		return nil
	}
	return &ItemCache{Rule: rule, Slots: map[CacheSlotKey]*CacheSlot{}, Log: make([][]CacheRecord, rows)}
}

// slot returns the states of key for expert, emptied when they belong to another expert.
func (c *ItemCache) slot(key CacheSlotKey, expert, rows int) *CacheSlot {
	s := c.Slots[key]
	if s == nil || s.Expert != expert || len(s.Rows) != rows {
		s = &CacheSlot{Expert: expert, Rows: make([]model.CacheState, rows)}
		c.Slots[key] = s
	}
	return s
}

// DropStates forgets every state, keeping the rule and the records.
func (c *ItemCache) DropStates() { clear(c.Slots) }

// StateBytes is the size of the states held.
func (c *ItemCache) StateBytes() int64 {
	var n int64
	for _, s := range c.Slots {
		for _, st := range s.Rows {
			n += st.Bytes()
		}
	}
	return n
}

// Rows returns rows [lo, hi) of the cache (states and records shared, not copied).
func (c *ItemCache) Rows(lo, hi int) *ItemCache {
	if c == nil {
		return nil
	}
	out := &ItemCache{Rule: c.Rule, Slots: map[CacheSlotKey]*CacheSlot{}, Log: c.Log[lo:hi:hi]}
	for k, s := range c.Slots {
		out.Slots[k] = &CacheSlot{Expert: s.Expert, Rows: s.Rows[lo:hi:hi]}
	}
	return out
}

// StackCaches joins the caches of items whose rows are put together, in order: they must
// share one rule (the server batches only such rows). A slot that only some parts hold, or
// hold for different experts, is kept only where present: rows lacking it get no state.
func StackCaches(parts []*ItemCache, rows []int) (*ItemCache, error) {
	if len(parts) == 0 || parts[0] == nil {
		for _, p := range parts {
			if p != nil {
				return nil, fmt.Errorf("%w: rows with and without a cache in one batch", ErrCache)
			}
		}
		return nil, nil
	}
	total := 0
	for _, n := range rows {
		total += n
	}
	out := NewItemCache(parts[0].Rule, total)
	at := 0
	for i, p := range parts {
		if p == nil || !sameRule(p.Rule, out.Rule) {
			return nil, fmt.Errorf("%w: rows of different cache rules in one batch", ErrCache)
		}
		for r := 0; r < rows[i]; r++ {
			if r < len(p.Log) {
				out.Log[at+r] = p.Log[r]
			}
		}
		for k, s := range p.Slots {
			dst := out.Slots[k]
			if dst == nil {
				dst = &CacheSlot{Expert: s.Expert, Rows: make([]model.CacheState, total)}
				out.Slots[k] = dst
			}
			if dst.Expert != s.Expert {
				continue
			}
			copy(dst.Rows[at:at+rows[i]], s.Rows)
		}
		at += rows[i]
	}
	return out, nil
}

func sameRule(a, b Cache) bool {
	return a.Mode == b.Mode && a.Threshold == b.Threshold && a.Interval == b.Interval && a.Branch == b.Branch &&
		a.Drop == b.Drop && slices.Equal(a.Steps, b.Steps)
}

// SameCache reports whether two rules are the same (rows under them may share a call).
func SameCache(a, b Cache) bool { return sameRule(a, b) }

// Computed counts the records of row that computed in full, and all of them.
func (c *ItemCache) Computed(row int) (computed, calls int) {
	for _, r := range c.Log[row] {
		calls++
		if r.Computed {
			computed++
		}
	}
	return computed, calls
}

// CacheSummary is one sample's step cache as report.json and `vdpp bench --json` give it:
// the rule, how many calls computed in full of all, the steps where any call computed (a
// static schedule calibrated from this run: --cache static --cache-steps), and every call.
type CacheSummary struct {
	Mode      string  `json:"mode"`
	Threshold float64 `json:"threshold,omitempty"`
	Interval  int     `json:"interval,omitempty"`
	Branch    int     `json:"branch,omitempty"`
	Steps     string  `json:"steps,omitempty"`
	Drop      bool    `json:"drop,omitempty"`
	// ComputedCalls of TotalCalls ran the whole denoiser.
	ComputedCalls int `json:"computed_calls"`
	TotalCalls    int `json:"total_calls"`
	// ComputedSteps are the steps where some call computed in full ("0-2,5").
	ComputedSteps string        `json:"computed_steps"`
	Calls         []CacheRecord `json:"calls"`
	// Summary is the run's one line about its cache (CacheOutcome.Line), set by the
	// command that reports it.
	Summary string `json:"summary,omitempty"`
	// Check is the comparison with the same job run without the cache, when one ran
	// (generate --cache-check).
	Check *CacheCheck `json:"check,omitempty"`
}

// CacheCheck compares a cached run's videos with the same job's uncached ones: PSNR and
// SSIM of the decoded frames (the uncached as reference), and the denoising time both ways.
type CacheCheck struct {
	PSNR       float64 `json:"psnr"`
	SSIM       float64 `json:"ssim"`
	UncachedMS float64 `json:"uncached_diffusion_ms"`
	CachedMS   float64 `json:"cached_diffusion_ms"`
}

// Summarize returns the summary of one sample's records under rule.
func Summarize(rule Cache, records []CacheRecord) CacheSummary {
	s := CacheSummary{Mode: rule.Mode, Threshold: rule.Threshold, Interval: rule.Interval, Branch: rule.Branch,
		Steps: FormatSteps(rule.Steps), Drop: rule.Drop, TotalCalls: len(records), Calls: records}
	var steps []int
	for _, r := range records {
		if r.Computed {
			s.ComputedCalls++
			if len(steps) == 0 || steps[len(steps)-1] != r.Step {
				steps = append(steps, r.Step)
			}
		}
	}
	slices.Sort(steps)
	s.ComputedSteps = FormatSteps(slices.Compact(steps))
	return s
}
