package plan

import (
	"reflect"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/pipeline"
)

// TestPredictDecodeSpread: a sample's decode parts on the last stage or shared by the last
// n stages (extra b*D/n on each), the step cut balanced around them, the decode latency at
// its parallel span, the decoder's weights on every decoding stage.
func TestPredictDecodeSpread(t *testing.T) {
	dec := func(parts int, partMS float64) Costs {
		c := SyntheticCosts(1, 4, Link{})
		c.DecodeParts, c.DecodePartMS = parts, partMS
		c.Weights = Weights{Denoiser: 100, Decode: 10}
		return c
	}
	w := func(ranks, micro int) Workload {
		x := small(8, 20, false)
		x.DecodeRanks, x.MicroBatch = ranks, micro
		return x
	}
	tests := []struct {
		name     string
		w        Workload
		m        Mesh
		c        Costs
		ranks    int
		stages   [][2]int
		stageMS  []float64
		first    float64
		interval float64
		weights  []int64
	}{
		{"small decode on the last stage: the cut absorbs it", w(0, 1), Mesh{2, 1, 1, 1}, dec(2, 3), 1,
			[][2]int{{0, 7}, {7, 8}}, []float64{7, 7}, 14, 7, []int64{100, 110}},
		{"small decode spread: the same interval, a shorter first sample", w(2, 1), Mesh{2, 1, 1, 1}, dec(2, 3), 2,
			[][2]int{{0, 4}, {4, 8}}, []float64{7, 7}, 8 + 3, 7, []int64{110, 110}},
		{"large decode on the last stage bounds the pipeline", w(1, 1), Mesh{2, 1, 1, 1}, dec(2, 10), 1,
			[][2]int{{0, 7}, {7, 8}}, []float64{7, 21}, 8 + 20, 21, []int64{100, 110}},
		{"large decode spread over 2 stages", w(2, 1), Mesh{2, 1, 1, 1}, dec(2, 10), 2,
			[][2]int{{0, 4}, {4, 8}}, []float64{14, 14}, 8 + 10, 14, []int64{110, 110}},
		{"spread over all 4 of 4 stages (more ranks asked than stages)", w(9, 1), Mesh{4, 1, 1, 1}, dec(2, 10), 4,
			[][2]int{{0, 2}, {2, 4}, {4, 6}, {6, 8}}, []float64{7, 7, 7, 7}, 8 + 10, 7, []int64{110, 110, 110, 110}},
		{"spread over the last 2 of 4 stages", w(2, 1), Mesh{4, 1, 1, 1}, dec(2, 10), 2,
			[][2]int{{0, 3}, {3, 6}, {6, 7}, {7, 8}}, []float64{3, 3, 11, 11}, 8 + 10, 11, []int64{100, 100, 110, 110}},
		{"micro-batch 2: 4 parts an item over 2 stages", w(2, 2), Mesh{2, 1, 1, 1}, dec(2, 10), 2,
			[][2]int{{0, 4}, {4, 8}}, []float64{28, 28}, 16 + 20, 28, []int64{110, 110}},
		{"one device decodes everything", w(3, 1), Mesh{1, 1, 1, 1}, dec(2, 10), 1,
			[][2]int{{0, 8}}, []float64{28}, 28, 28, []int64{110}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Predict(tc.w, tc.m, tc.c, 0)
			if err != nil {
				t.Fatal(err)
			}
			if p.DecodeRanks != tc.ranks || !reflect.DeepEqual(p.StageSteps, tc.stages) || !reflect.DeepEqual(p.StageWeightBytes, tc.weights) {
				t.Fatalf("decode ranks %d, stages %v, weights %v; want %d, %v, %v", p.DecodeRanks, p.StageSteps, p.StageWeightBytes, tc.ranks, tc.stages, tc.weights)
			}
			for k := range tc.stageMS {
				if !near(p.StageMS[k], tc.stageMS[k]) {
					t.Fatalf("stage times %v, want %v", p.StageMS, tc.stageMS)
				}
			}
			if !near(p.FirstSampleMS, tc.first) || !near(p.IntervalMS, tc.interval) {
				t.Fatalf("first %v interval %v, want %v %v", p.FirstSampleMS, p.IntervalMS, tc.first, tc.interval)
			}
		})
	}
}

// TestDecodeNotes: the planner says when spreading the decode helps, gains nothing or loses.
func TestDecodeNotes(t *testing.T) {
	c := SyntheticCosts(1, 4, Link{})
	tests := []struct {
		name   string
		steps  int
		ranks  int
		parts  int
		partMS float64
		want   string
	}{
		{"decode bound: spread helps", 8, 1, 2, 10, "--decode-ranks 2 spreads its 2 parts over the stages, 71.4 samples/s instead of 47.6 (1.50x)"},
		{"spread and helps", 8, 2, 2, 10, "decode spread over 2 stages: 71.4 samples/s instead of 47.6 on the last stage alone (1.50x)"},
		{"spread gains nothing", 8, 2, 2, 3, "decode spread over 2 stages gains nothing"},
		{"spread loses to the step cut", 3, 2, 1, 1, "decode spread over 2 stages loses"},
		{"small decode on the last stage: the engine's flag for the cut", 8, 1, 2, 3, "steps cut 7+1 around the decode: generate and bench cut so with --decode-steps 6.00 (by steps alone: 4+4)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := small(tc.steps, 20, false)
			w.DecodeRanks = tc.ranks
			cc := c
			cc.DecodeParts, cc.DecodePartMS = tc.parts, tc.partMS
			res, err := Plan(Request{Workload: w, Devices: 2, Costs: cc})
			if err != nil {
				t.Fatal(err)
			}
			var pp2 Prediction
			for _, p := range append(res.Configs, res.Infeasible...) {
				if p.PP == 2 {
					pp2 = p
				}
			}
			got := strings.Join(pp2.Notes, "; ")
			if tc.want == "" && strings.Contains(got, "decode") || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Fatalf("notes %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDecodeCostsValidate(t *testing.T) {
	c := SyntheticCosts(1, 4, Link{})
	c.DecodePartMS = -1
	if err := c.Validate(); err == nil {
		t.Error("negative decode_part_ms accepted")
	}
	c.DecodePartMS, c.DecodeParts = 1, -2
	if err := c.Validate(); err == nil {
		t.Error("negative decode_parts accepted")
	}
	w := small(4, 2, false)
	w.DecodeRanks = -1
	if err := w.Validate(); err == nil {
		t.Error("negative decode_ranks accepted")
	}
}

// The planner's cut is the engine's: family.Resolved.StagePlan with the extras of
// --decode-steps (the decode in steps) gives the stage steps Predict costs.
func TestPredictCutIsEngineCut(t *testing.T) {
	for _, tc := range []struct{ steps, pp, ranks, parts int }{{16, 2, 1, 2}, {16, 2, 2, 2}, {12, 3, 2, 1}, {8, 4, 1, 3}} {
		w := small(tc.steps, 20, false)
		w.DecodeRanks = tc.ranks
		c := SyntheticCosts(1, 4, Link{})
		c.DecodeParts, c.DecodePartMS = tc.parts, 7
		p, err := Predict(w, Mesh{PP: tc.pp, CFG: 1, CP: 1, DP: 1}, c, 0)
		if err != nil {
			t.Fatal(err)
		}
		ones := make([]float64, tc.steps)
		for i := range ones {
			ones[i] = 1
		}
		decodeSteps := float64(tc.parts) * c.DecodePartMS / p.StepMS
		cut, err := pipeline.CutStages(ones, tc.pp, nil, pipeline.StageExtras(tc.pp, 0, 0, decodeSteps, tc.ranks))
		if err != nil {
			t.Fatal(err)
		}
		for k, r := range cut {
			if p.StageSteps[k] != [2]int{r.Start, r.End} {
				t.Errorf("%+v: planner cut %v, engine cut %v", tc, p.StageSteps, cut)
				break
			}
		}
	}
}

// The conditioning on stage 0 (--prepare-ms) moves the cut too; the note names generate's
// --condition-steps with --decode-steps.
func TestCutNoteConditioning(t *testing.T) {
	c := SyntheticCosts(1, 4, Link{})
	c.DecodeParts, c.DecodePartMS, c.PrepareMS = 1, 1, 4
	w := small(8, 20, false)
	p, err := Predict(w, Mesh{PP: 2, CFG: 1, CP: 1, DP: 1}, c, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := cutNote(Request{Workload: w, Devices: 2, Costs: c}, p)
	want := "steps cut 3+5 around the conditioning and the decode: generate cuts so with --decode-steps 1.00 --condition-steps 4.00 (by steps alone: 4+4)"
	if got != want {
		t.Errorf("note %q, want %q", got, want)
	}
}
