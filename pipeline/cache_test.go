package pipeline_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/model/knob"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/sched"
	"github.com/vdpp/vdpp/tensor"
)

var fbcache = pipeline.Cache{Mode: pipeline.CacheFB, Threshold: 0.05}

// twoExperts is a multistep stepper with two experts (IDs 1 and 2) split at step 3.
func twoExperts(t *testing.T, steps int) func(sc *sched.Euler) *pipeline.Stepper {
	return func(sc *sched.Euler) *pipeline.Stepper {
		return &pipeline.Stepper{Sched: adamsBashforth{sc}, Experts: []pipeline.Expert{
			{Steps: pipeline.Range{Start: 0, End: 3}, Model: synth(t), ID: 1},
			{Steps: pipeline.Range{Start: 3, End: steps}, Model: synth(t), ID: 2},
		}}
	}
}

func skipped(logs map[int64][]pipeline.CacheRecord) int {
	n := 0
	for _, l := range logs {
		for _, r := range l {
			if !r.Computed {
				n++
			}
		}
	}
	return n
}

func sameLogs(t *testing.T, got, want map[int64][]pipeline.CacheRecord) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("records of %d samples, want %d", len(got), len(want))
	}
	for s, w := range want {
		if fmt.Sprint(got[s]) != fmt.Sprint(w) {
			t.Fatalf("sample %d's cache records\n%v\nwant\n%v", s, got[s], w)
		}
	}
}

// A cached run cut over K = 1..4 stages gives the bits and the decisions of one stage: the
// cache travels in the hand-off beside the multistep scheduler's state; each expert keeps
// its own states, so an expert's first call computes.
func TestCacheAcrossStages(t *testing.T) {
	const steps = 8
	base := runSpec{stages: 1, steps: steps, samples: 3, micro: 2, guided: true, cache: fbcache}
	want, wantLogs := runStepperLogs(t, base, twoExperts(t, steps))
	plain := base
	plain.cache = pipeline.Cache{}
	if !differ(want, runStepper(t, plain, twoExperts(t, steps))) {
		t.Fatal("the cached run gives the uncached bits: nothing was reused")
	}
	if n := skipped(wantLogs); n == 0 {
		t.Fatal("no call reused the cache")
	}
	for s, l := range wantLogs {
		if len(l) != 2*steps {
			t.Fatalf("sample %d: %d records, want %d (cond and uncond per step)", s, len(l), 2*steps)
		}
		for i, r := range l {
			if wantBranch := []string{pipeline.BranchCond, pipeline.BranchUncond}[i%2]; r.Step != i/2 || r.Branch != wantBranch {
				t.Fatalf("sample %d record %d is %+v, want step %d %s", s, i, r, i/2, wantBranch)
			}
			if first := r.Step == 0 || r.Step == 3; first != math.IsNaN(float64(r.Value)) || first && !r.Computed {
				t.Fatalf("sample %d: %+v: an expert's first call must compute with no indicator, and only it", s, r)
			}
			if r.Expert != 1+min(r.Step/3, 1) {
				t.Fatalf("sample %d: step %d ran expert %d", s, r.Step, r.Expert)
			}
			// A reuse measures how far its input moved from the computing call's; a
			// computing call measures nothing. The cut stages below carry the reference
			// in the hand-off, so their records are these, bit for bit.
			if c := float64(r.Change); r.Computed != math.IsNaN(c) || !r.Computed && !(c > 0 && c < 10) {
				t.Fatalf("sample %d: %+v: want a latent change > 0 exactly at the reuses", s, r)
			}
		}
	}
	for k := 2; k <= 4; k++ {
		rs := base
		rs.stages = k
		t.Run(fmt.Sprintf("K=%d", k), func(t *testing.T) {
			got, logs := runStepperLogs(t, rs, twoExperts(t, steps))
			assertSameFinals(t, got, want)
			sameLogs(t, logs, wantLogs)
		})
	}
}

// With Drop the hand-off carries no states: each stage's first call computes (no
// indicator), and a one-stage run is the carried run.
func TestCacheDroppedAtStageBoundary(t *testing.T) {
	const steps = 8
	mk := func(sc *sched.Euler) *pipeline.Stepper { return &pipeline.Stepper{Model: synth(t), Sched: sc} }
	carry := runSpec{stages: 1, steps: steps, samples: 2, micro: 1, guided: true, cache: fbcache}
	want, wantLogs := runStepperLogs(t, carry, mk)
	drop := carry
	drop.cache.Drop = true
	one, oneLogs := runStepperLogs(t, drop, mk)
	assertSameFinals(t, one, want)
	sameLogs(t, oneLogs, wantLogs)

	drop.stages = 4 // stages start at steps 0, 2, 4, 6
	got, logs := runStepperLogs(t, drop, mk)
	if !differ(got, want) {
		t.Fatal("dropping the cache at 3 boundaries changed nothing")
	}
	for s, l := range logs {
		for _, r := range l {
			if first := r.Step%2 == 0; first != math.IsNaN(float64(r.Value)) || first && !r.Computed {
				t.Fatalf("sample %d: %+v: a stage's first call must compute afresh, and only it", s, r)
			}
		}
	}
	if skipped(logs) == 0 {
		t.Fatal("no call reused the cache within a stage")
	}
}

// A sample's bits and decisions do not depend on which samples share its micro-batch.
func TestCachePerSample(t *testing.T) {
	mk := func(sc *sched.Euler) *pipeline.Stepper { return &pipeline.Stepper{Model: synth(t), Sched: sc} }
	alone, aloneLogs := runStepperLogs(t, runSpec{stages: 1, steps: 8, samples: 4, micro: 1, guided: true, cache: fbcache}, mk)
	batched, batchedLogs := runStepperLogs(t, runSpec{stages: 2, steps: 8, samples: 4, micro: 3, guided: true, cache: fbcache}, mk)
	assertSameFinals(t, batched, alone)
	sameLogs(t, batchedLogs, aloneLogs)
}

// Static rules compute exactly their steps (and each expert's first), whatever the values.
func TestCacheStaticSchedules(t *testing.T) {
	const steps = 8
	for _, c := range []struct {
		rule pipeline.Cache
		full []int
	}{
		{pipeline.Cache{Mode: pipeline.CacheDeep, Interval: 3}, []int{0, 3, 6}},
		{pipeline.Cache{Mode: pipeline.CacheStatic, Steps: []int{0, 1, 5}}, []int{0, 1, 3, 5}}, // 3: expert 2's first
		{pipeline.Cache{Mode: pipeline.CacheStatic, Interval: 4}, []int{0, 3, 4}},
	} {
		t.Run(c.rule.String(), func(t *testing.T) {
			rule, err := c.rule.Resolve(steps, []int{3})
			if err != nil {
				t.Fatal(err)
			}
			rs := runSpec{stages: 2, steps: steps, samples: 1, micro: 1, guided: true, cache: rule}
			_, logs := runStepperLogs(t, rs, twoExperts(t, steps))
			var full []int
			for _, r := range logs[0] {
				if r.Computed && r.Branch == pipeline.BranchCond {
					full = append(full, r.Step)
				}
				if r.Computed != rule.Planned(r.Step, []int{3}) {
					t.Fatalf("%+v: the plan says computed=%v", r, !r.Computed)
				}
			}
			if !slices.Equal(full, c.full) {
				t.Fatalf("computed steps %v, want %v", full, c.full)
			}
		})
	}
}

// Under CFG and context parallelism every rank takes the one-rank decisions (a rank that
// decided otherwise would compute other bits, or wait forever in a collective the others
// skip), and every last-stage rank holds the same records, both CFG halves included.
func TestCacheMeshes(t *testing.T) {
	for _, ms := range []meshSpec{
		{pp: 1, cfg: 2, cp: 1, dp: 1},
		{pp: 1, cfg: 1, cp: 2, dp: 1, frames: 5},
		{pp: 2, cfg: 2, cp: 2, dp: 1},
	} {
		if ms.frames == 0 {
			ms.frames = 4
		}
		ms.steps, ms.samples, ms.micro, ms.cache = 6, 3, 1, fbcache
		t.Run(fmt.Sprintf("pp%d_cfg%d_cp%d", ms.pp, ms.cfg, ms.cp), func(t *testing.T) {
			base := ms
			base.pp, base.cfg, base.cp = 1, 1, 1
			want, _, wantLogs := runMeshLogs(t, base)
			if skipped(wantLogs[0]) == 0 {
				t.Fatal("no call reused the cache")
			}
			got, _, logs := runMeshLogs(t, ms)
			assertSameFinals(t, got, want)
			for r, l := range logs {
				if len(l) > 0 {
					sameLogs(t, l, wantLogs[0])
				} else if r >= len(logs)-ms.cfg*ms.cp {
					t.Fatalf("last-stage rank %d holds no records", r)
				}
			}
		})
	}
}

// The cache survives the wire format: the rule exactly (a threshold not representable in
// float32), the states unless dropped, the records always.
func TestItemMessageCache(t *testing.T) {
	rule := pipeline.Cache{Mode: pipeline.CacheStatic, Threshold: 0.1136, Steps: []int{0, 4, 9}, Branch: 2}
	it := &pipeline.Item{Group: 1, Samples: []int64{4, 5}, Step: 2, Latent: tensor.New(2, 1, 1, 1, 2), Cache: pipeline.NewItemCache(rule, 2)}
	it.Cache.Slots[pipeline.CacheSlotKey{Window: 1, Branch: pipeline.BranchUncond}] = &pipeline.CacheSlot{Expert: 2,
		Rows: []model.CacheState{nil, {"a": {Shape: []int{3}, Data: []float32{1, 2, 3}}}}}
	it.Cache.Log[1] = []pipeline.CacheRecord{{Step: 0, Expert: 2, Branch: pipeline.BranchCond, Window: 1, Computed: true, Value: float32(math.NaN())},
		{Step: 1, Expert: 2, Branch: pipeline.BranchUncond, Value: 0.25}}
	roundTrip := func(it *pipeline.Item) *pipeline.Item { return wireRoundTrip(t, it) }
	got := roundTrip(it)
	if !reflect.DeepEqual(got.Cache.Rule, rule) {
		t.Fatalf("rule %+v, want %+v", got.Cache.Rule, rule)
	}
	if fmt.Sprint(got.Cache.Log) != fmt.Sprint(it.Cache.Log) {
		t.Fatalf("records %v, want %v", got.Cache.Log, it.Cache.Log)
	}
	s := got.Cache.Slots[pipeline.CacheSlotKey{Window: 1, Branch: pipeline.BranchUncond}]
	if s == nil || s.Expert != 2 || s.Rows[0] != nil || !tensor.BitEqual(s.Rows[1]["a"], it.Cache.Slots[pipeline.CacheSlotKey{Window: 1, Branch: pipeline.BranchUncond}].Rows[1]["a"]) {
		t.Fatalf("slot %+v", s)
	}
	it.Cache.Rule.Drop = true
	got = roundTrip(it)
	if len(got.Cache.Slots) != 0 || !got.Cache.Rule.Drop || len(got.Cache.Log[1]) != 2 {
		t.Fatalf("a dropped cache arrived as %+v", got.Cache)
	}
	if got := roundTrip(&pipeline.Item{Samples: []int64{0}, Latent: tensor.New(1, 1, 1, 1, 1)}); got.Cache != nil {
		t.Fatal("an item without a cache arrived with one")
	}
}

// Resolve fills defaults and refuses what a run cannot take, as one line naming the flag.
func TestCacheResolve(t *testing.T) {
	for _, c := range []struct {
		rule     pipeline.Cache
		steps    int
		switches []int
		want     string // error text; "" for success
		check    func(pipeline.Cache) bool
	}{
		{rule: pipeline.Cache{}, steps: 1},
		{rule: pipeline.Cache{Mode: "none"}, steps: 1, check: func(c pipeline.Cache) bool { return !c.On() }},
		{rule: pipeline.Cache{Mode: "fbcache"}, steps: 4, check: func(c pipeline.Cache) bool { return c.Threshold == pipeline.DefaultCacheThreshold }},
		{rule: pipeline.Cache{Mode: "deepcache"}, steps: 4, check: func(c pipeline.Cache) bool { return c.Interval == 3 }},
		{rule: pipeline.Cache{Mode: "static", Interval: 2}, steps: 5, check: func(c pipeline.Cache) bool { return slices.Equal(c.Steps, []int{0, 2, 4}) }},
		{rule: pipeline.Cache{Mode: "teacache"}, steps: 4, want: `--cache "teacache"`},
		{rule: pipeline.Cache{Mode: "fbcache", Threshold: -0.1}, steps: 4, want: "--cache-threshold -0.1 must be > 0"},
		{rule: pipeline.Cache{Mode: "fbcache", Threshold: math.NaN()}, steps: 4, want: "--cache-threshold NaN"},
		{rule: pipeline.Cache{Mode: "deepcache", Interval: 1}, steps: 4, want: "--cache-interval 1 must be >= 2"},
		{rule: pipeline.Cache{Mode: "deepcache", Branch: -1}, steps: 4, want: "--cache-branch -1"},
		{rule: pipeline.Cache{Mode: "static"}, steps: 4, want: "--cache static needs --cache-steps"},
		{rule: pipeline.Cache{Mode: "static", Steps: []int{0, 7}}, steps: 4, want: "--cache-steps 0,7"},
		{rule: pipeline.Cache{Mode: "static", Steps: []int{0, 1}, Interval: 2}, steps: 4, want: "both given"},
		{rule: pipeline.Cache{Mode: "static", Steps: []int{0, 1, 2}}, steps: 3, want: "computes every step"},
		{rule: pipeline.Cache{Mode: "deepcache", Interval: 3}, steps: 1, want: "computes every step"},
		{rule: pipeline.Cache{Mode: "fbcache"}, steps: 1, want: "nothing can be reused"},
		{rule: pipeline.Cache{Mode: "fbcache"}, steps: 2, switches: []int{1}, want: "nothing can be reused"},
	} {
		got, err := c.rule.Resolve(c.steps, c.switches)
		msg := "" // the refusal as the command line spells it
		if ke, ok := knob.AsError(err); ok {
			msg = ke.In(knob.Flags)
		}
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v", c.rule, err)
		case c.want != "" && (err == nil || !errors.Is(err, pipeline.ErrCache) || !bytes.Contains([]byte(msg), []byte(c.want))):
			t.Errorf("%+v: error %v, want one containing %q", c.rule, err, c.want)
		case c.check != nil && !c.check(got):
			t.Errorf("%+v resolved to %+v", c.rule, got)
		}
	}
}

func TestParseSteps(t *testing.T) {
	got, err := pipeline.ParseSteps("5, 0-2,9,1")
	if err != nil || !slices.Equal(got, []int{0, 1, 2, 5, 9}) {
		t.Fatalf("got %v, %v", got, err)
	}
	if s := pipeline.FormatSteps(got); s != "0-2,5,9" {
		t.Fatalf("formatted %q", s)
	}
	for _, bad := range []string{"x", "3-1", "-2", "1-", "0,,a"} {
		if _, err := pipeline.ParseSteps(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// FuzzParseSteps: any text parses to ascending steps that format back to themselves, or an
// error; never a panic.
func FuzzParseSteps(f *testing.F) {
	for _, s := range []string{"0-2,5,9", "", "3", "1-1000,4", "a-b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		steps, err := pipeline.ParseSteps(s)
		if err != nil {
			return
		}
		again, err := pipeline.ParseSteps(pipeline.FormatSteps(steps))
		if err != nil || !slices.Equal(again, steps) || !slices.IsSorted(steps) {
			t.Fatalf("%q: %v, round trip %v (%v)", s, steps, again, err)
		}
	})
}

// A long video's temporal windows keep a cache slot each: every step records each window's
// calls, and a cut over stages gives the one-stage bits and decisions.
func TestCacheWindows(t *testing.T) {
	mk := func(sc *sched.Euler) *pipeline.Stepper {
		return &pipeline.Stepper{Model: synth(t), Sched: sc, Windows: &pipeline.Windows{Size: 2, Overlap: 1, Blend: "linear"}}
	}
	base := runSpec{stages: 1, steps: 6, samples: 2, micro: 1, guided: true, cache: fbcache}
	want, wantLogs := runStepperLogs(t, base, mk)
	for _, l := range wantLogs {
		if len(l) != 6*2*2 || l[2].Window != 1 || l[0].Window != 0 {
			t.Fatalf("records %v: want two windows x two branches per step", l)
		}
	}
	if skipped(wantLogs) == 0 {
		t.Fatal("no window reused its cache")
	}
	base.stages = 3
	got, logs := runStepperLogs(t, base, mk)
	assertSameFinals(t, got, want)
	sameLogs(t, logs, wantLogs)
}

// A step of the largest int, or a range up to it, is refused (the loop once wrapped around
// and never ended: an OpenAI create of cache_steps "9223372036854775807" hung its handler).
func TestParseStepsBounded(t *testing.T) {
	for _, s := range []string{"9223372036854775807", "0-9223372036854775807", "0-1048576"} {
		if steps, err := pipeline.ParseSteps(s); err == nil {
			t.Errorf("%q: %d steps, want a refusal", s, len(steps))
		}
	}
}
