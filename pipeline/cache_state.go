package pipeline

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"

	"github.com/vdpp/vdpp/model"
)

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
