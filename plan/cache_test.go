package plan

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/model/synthetic"
	"github.com/vdpp/vdpp/pipeline"
)

// A static step cache: the stages are cut by computed work (the engine's cut), a reusing
// step costs its fraction of the computation while its collectives stay, the predicted
// speedup is the uncached prediction's over the cached one, the states ride in the
// hand-off unless dropped, and a dropped cache makes each stage's first step compute.
func TestPredictStaticCache(t *testing.T) {
	w := Workload{Steps: 12, Samples: 8, Frames: 4, Height: 8, Width: 8, Channels: 4, Guided: true}
	c := SyntheticCosts(5, 4, Link{LatencyMS: 0.1, BytesPerS: 1e9})
	rule := pipeline.Cache{Mode: pipeline.CacheStatic, Steps: []int{0, 1, 2, 3, 4, 5}}
	c.Cache = &CacheCosts{Rule: rule, ReuseFraction: 0.125, StateBytes: 1 << 20}
	one, err := Predict(w, Mesh{PP: 1, CFG: 1, CP: 1, DP: 1}, c, 0)
	if err != nil {
		t.Fatal(err)
	}
	// 6 full steps and 6 at 1/8, against 12 full: 12 / 6.75.
	if want := 12 / 6.75; math.Abs(one.CacheSpeedup-want) > 1e-9 || math.Abs(one.CacheLatencySpeedup-want) > 1e-9 {
		t.Fatalf("one device: speedup %v (latency %v), want %v", one.CacheSpeedup, one.CacheLatencySpeedup, want)
	}
	pp, err := Predict(w, Mesh{PP: 2, CFG: 1, CP: 1, DP: 1}, c, 0)
	if err != nil {
		t.Fatal(err)
	}
	cut, err := pipeline.CutStages(rule.StepCosts(12, nil, 0.125), 2, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := [][2]int{{cut[0].Start, cut[0].End}, {cut[1].Start, cut[1].End}}; !slices.Equal(pp.StageSteps, got) || got[0] != [2]int{0, 3} {
		t.Fatalf("stages %v, the engine cuts %v", pp.StageSteps, got)
	}
	// Carried: the hand-off holds the latent and both branches' states.
	latent := w.LatentBytes()
	if want := c.HandOff.MS(latent + 2<<20); math.Abs(pp.HandOffMS-want) > 1e-12 {
		t.Fatalf("hand-off %v ms, want %v", pp.HandOffMS, want)
	}
	cfg, err := Predict(w, Mesh{PP: 2, CFG: 2, CP: 1, DP: 1}, c, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := c.HandOff.MS(latent + 1<<20); math.Abs(cfg.HandOffMS-want) > 1e-12 {
		t.Fatalf("cfg2: hand-off %v ms, want %v (one branch per rank)", cfg.HandOffMS, want)
	}
	// Dropped: a latent-sized hand-off, and stage 1's first step, a reusing one when
	// carried, computes.
	drop := c
	drop.Cache = &CacheCosts{Rule: pipeline.Cache{Mode: pipeline.CacheStatic, Steps: []int{0}}, ReuseFraction: 0.125, StateBytes: 1 << 20}
	carried, err := Predict(w, Mesh{PP: 2, CFG: 1, CP: 1, DP: 1}, drop, 0)
	if err != nil {
		t.Fatal(err)
	}
	drop.Cache.Rule.Drop = true
	pd, err := Predict(w, Mesh{PP: 2, CFG: 1, CP: 1, DP: 1}, drop, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := pd.StageSteps[1][0]
	if want := c.HandOff.MS(latent); math.Abs(pd.HandOffMS-want) > 1e-12 || b == 0 || pd.StepWork[b] != 1 || carried.StepWork[b] != 0.125 {
		t.Fatalf("dropped: hand-off %v ms (want %v), stage 1's first step %d works %v (carried %v)", pd.HandOffMS, want, b, pd.StepWork[b], carried.StepWork[b])
	}
	// The planner refuses an adaptive rule: its computed steps are not known before the run.
	c.Cache.Rule = pipeline.Cache{Mode: pipeline.CacheFB, Threshold: 0.1}
	if _, err := Predict(w, Mesh{PP: 1, CFG: 1, CP: 1, DP: 1}, c, 0); !errors.Is(err, ErrBadInput) {
		t.Fatalf("an adaptive rule was planned: %v", err)
	}
}

// A pipeline's notes weigh carrying the cache against dropping it: tiny states on a slow
// link are carried, huge ones dropped.
func TestCacheHandoffNote(t *testing.T) {
	w := Workload{Steps: 12, Samples: 8, Frames: 4, Height: 8, Width: 8, Channels: 4}
	for _, c := range []struct {
		state int64
		want  string
	}{{1 << 10, "carrying is better"}, {1 << 32, "dropping is better"}} {
		costs := SyntheticCosts(5, 4, Link{LatencyMS: 0.1, BytesPerS: 1e8})
		costs.Cache = &CacheCosts{Rule: pipeline.Cache{Mode: pipeline.CacheStatic, Steps: []int{0}}, ReuseFraction: 0.125, StateBytes: c.state}
		res, err := Plan(Request{Workload: w, Devices: 2, Costs: costs})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, p := range append(res.Configs, res.Infeasible...) {
			if p.PP == 2 {
				found = strings.Contains(strings.Join(p.Notes, "; "), c.want)
			}
		}
		if !found {
			t.Errorf("state %d bytes: no note %q", c.state, c.want)
		}
	}
}

// MeasureReuse: a simulator's declared reuse cost (the synthetic model's 1/8), whatever
// the clock says; a model without a cache is refused.
func TestMeasureReuse(t *testing.T) {
	d, err := synthetic.New(model.Config{StepMS: 0})
	if err != nil {
		t.Fatal(err)
	}
	c := &Calibrator{Repeats: 1}
	frac, ms, err := c.MeasureReuse(context.Background(), d, []int{2, 4, 4, 4}, pipeline.Cache{Mode: pipeline.CacheStatic})
	if err != nil || frac != synthetic.ReuseCost || len(ms) != 2 {
		t.Fatalf("fraction %v (%v), %v", frac, ms, err)
	}
	if _, _, err := c.MeasureReuse(context.Background(), plainModel{d}, []int{2, 4, 4, 4}, pipeline.Cache{}); !errors.Is(err, ErrBadInput) {
		t.Fatalf("a model without a cache: %v", err)
	}
}

// plainModel hides a denoiser's cache.
type plainModel struct{ model.Denoiser }
