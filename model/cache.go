package model

import (
	"context"
	"fmt"
	"math"

	"github.com/vdpp/vdpp/tensor"
)

// CacheState is what a caching denoiser keeps of one row between its calls (FBCache: the
// first block's last residual and the remaining blocks' residual; DeepCache: the deep
// feature). The engine stores one per sample, expert, CFG branch and temporal window,
// hands it back on the row's next call and carries it between pipeline stages; it never
// reads the tensors. Under context parallelism a member's state covers its own frames.
type CacheState map[string]*tensor.Dense

// Bytes is the state's size in float32 bytes.
func (s CacheState) Bytes() int64 {
	var n int64
	for _, t := range s {
		if t != nil {
			n += 4 * int64(t.Len())
		}
	}
	return n
}

// CacheDecision says what one row of a cached call does.
type CacheDecision int

const (
	// CacheAuto leaves the decision to the denoiser's adaptive rule (FBCache: the first
	// block's residual against the cached one, compared with CacheCall.Threshold).
	CacheAuto CacheDecision = iota
	// CacheCompute runs the whole network and refreshes the row's state.
	CacheCompute
	// CacheReuse reuses the row's state in place of the cached part of the network.
	CacheReuse
)

func (d CacheDecision) String() string {
	switch d {
	case CacheAuto:
		return "auto"
	case CacheCompute:
		return "compute"
	case CacheReuse:
		return "reuse"
	}
	return "unknown"
}

// CacheRow is one row of a cached call: what the engine asks, the row's state, and what
// the denoiser did.
type CacheRow struct {
	// Decision is what the engine asks. A row without a state computes whatever it asks.
	Decision CacheDecision
	// State is the row's state before the call (nil: none); the denoiser replaces it by
	// the state after the call (unchanged when the row reused it).
	State CacheState

	// Computed is set by the denoiser: the row ran the whole network.
	Computed bool
	// Value is set by the denoiser: the adaptive rule's indicator this call (FBCache:
	// mean|r - r_prev| / mean|r_prev|), NaN when there was none (no previous state, or a
	// rule that has no indicator).
	Value float64
}

// CacheCall is the cache side of one denoiser call: one CacheRow per input row. The rows
// of one call share one rule (the engine batches only items of the same pipeline.Cache),
// hence one Threshold and one Branch.
type CacheCall struct {
	Rows []CacheRow
	// Threshold is the adaptive rule's threshold (CacheAuto rows).
	Threshold float64
	// Branch is DeepCache's skip branch: how deep the part that a reused call skips starts.
	Branch int
	// Mode is the rule's mode (pipeline.Cache's: "fbcache", "deepcache", "static"), for a
	// denoiser that reuses differently by mode (SVD: DeepCache's shallow call for
	// deepcache, the whole call for static and its adaptive rule).
	Mode string

	// Work is set by simulator denoisers (model.Paced): the call's work in whole rows,
	// a reusing row counting the part of a full row it costs. 0: one per row.
	Work float64
}

// NewCacheCall returns a call of n rows asking decision of each, with empty states and
// NaN values.
func NewCacheCall(n int, decision CacheDecision) *CacheCall {
	c := &CacheCall{Rows: make([]CacheRow, n)}
	for i := range c.Rows {
		c.Rows[i] = CacheRow{Decision: decision, Value: math.NaN()}
	}
	return c
}

// StepCacher is implemented by denoisers that can reuse work of an earlier call of the same
// row (docs/caching.md). PredictCached is Predict with c.Rows[r] for row r: it decides each
// row from c.Rows[r].Decision (CacheAuto: its own rule), sets Computed and Value, and
// replaces State. A row's decision and output depend only on that row's input and state,
// never on the other rows of the call, so a sample's bits do not depend on its batch.
type StepCacher interface {
	PredictCached(ctx context.Context, in Input, c *CacheCall) (*tensor.Dense, error)
}

// FrameStepCacher is a StepCacher that is also context parallel: PredictFramesCached is
// PredictFrames with a cache whose states cover this member's frames. Every member of the
// group must take the same decision for a row, or the members' exchanges would part ways:
// an adaptive rule combines the members' partial indicators through part.Comm (one small
// all-gather) so each member compares the same value.
type FrameStepCacher interface {
	PredictFramesCached(ctx context.Context, in Input, part FramePart, c *CacheCall) (*tensor.Dense, error)
}

// ChangeSums writes the partial sums of an adaptive rule's indicator (ChangeOf) for one
// row: for each of frames frames (equal contiguous runs of cur and prev), sum|cur - prev|
// then sum|prev| into dst[2f], dst[2f+1].
func ChangeSums(dst, cur, prev []float32, frames int) {
	per := len(cur) / frames
	for f := range frames {
		var diff, base float64
		for j := f * per; j < (f+1)*per; j++ {
			diff += math.Abs(float64(cur[j] - prev[j]))
			base += math.Abs(float64(prev[j]))
		}
		dst[2*f], dst[2*f+1] = float32(diff), float32(base)
	}
}

// ChangeOf is an adaptive rule's indicator for row, mean|cur - prev| / mean|prev|, from
// the frame sums (ChangeSums) of every context-parallel member in member order (one rank:
// its own), each a [rows, frames, 2] tensor. Adding them frame by frame in that order
// gives every member, and one rank alone, the same number.
func ChangeOf(all []*tensor.Dense, row int) (float64, error) {
	var diff, base float64
	for _, s := range all {
		if len(s.Shape) != 3 || s.Shape[2] != 2 || row >= s.Shape[0] {
			return 0, fmt.Errorf("model: cache indicator sums %v for row %d", s.Shape, row)
		}
		n := s.Shape[1]
		for f := range n {
			diff += float64(s.Data[(row*n+f)*2])
			base += float64(s.Data[(row*n+f)*2+1])
		}
	}
	return diff / base, nil
}
