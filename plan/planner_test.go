package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func meshes(ps []Prediction) []Mesh {
	out := make([]Mesh, len(ps))
	for i, p := range ps {
		out[i] = p.Mesh
	}
	return out
}

func hasNote(notes []string, parts ...string) bool {
	for _, n := range notes {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(n, p)
		}
		if ok {
			return true
		}
	}
	return false
}

func TestPlanVerdict(t *testing.T) {
	syn := SyntheticCosts(1, 4, Link{LatencyMS: 0.1})
	tight := SyntheticCosts(1, 1, Link{LatencyMS: 0.1})
	tight.Weights = Weights{Condition: 2<<30 + 1<<30, Denoiser: 10 << 30, Decode: 2 << 30}
	oneFrame := Workload{Steps: 28, Samples: 60, Frames: 1, Height: 16, Width: 16, Channels: 4}
	tests := []struct {
		name       string
		req        Request
		throughput Relation
		latency    Relation
		onlyPP     []Mesh
		notes      [][]string
	}{
		{"28 steps on 7: dp equals pp in throughput and beats it in latency",
			Request{Workload: small(28, 60, false), Devices: 7, Costs: syn, Goal: GoalThroughput},
			RelEqual, RelDPBetter, nil,
			[][]string{{"data parallelism equals the step pipeline", "dp=7 250.0 samples/s", "pp=7 250.0 samples/s"},
				{"first sample: dp=7 28.00 ms, pp=7 28.60 ms", "6 hand-offs of 0.10 ms"},
				{"memory favours no mesh"}}},
		{"25 steps on 7: unequal stages, dp beats pp",
			Request{Workload: small(25, 60, false), Devices: 7, Costs: syn, Goal: GoalThroughput},
			RelDPBetter, RelDPBetter, nil,
			[][]string{{"data parallelism beats the step pipeline", "dp=7 280.0", "pp=7 250.0", "12.0% more", "slowest stage takes 4.00 ms"}}},
		{"3 samples on 7: replicas idle, pp beats dp",
			Request{Workload: small(28, 3, false), Devices: 7, Costs: syn, Goal: GoalThroughput},
			RelPPBetter, RelDPBetter, nil,
			[][]string{{"the step pipeline beats data parallelism", "3 items keep only 3 of 7 replicas busy"}}},
		{"memory tight: only the pipeline fits",
			Request{Workload: oneFrame, Devices: 2, Costs: tight, MemoryPerDevice: 14 << 30, Goal: GoalThroughput},
			RelEqual, RelEqual, []Mesh{{2, 1, 1, 1}},
			[][]string{{"the pipeline wins here", "15.00 GiB", "limit 14.00 GiB", "pp=2 needs at most 13.00 GiB"},
				{"best for throughput: pp=2 cfg=1 cp=1 dp=1"},
				{"fit only thanks to the pipeline split", "pp=2 cfg=1 cp=1 dp=1"}}},
		{"memory too tight for both: stage 0 still holds the encoders",
			Request{Workload: oneFrame, Devices: 2, Costs: tight, MemoryPerDevice: 12 << 30, Goal: GoalThroughput},
			RelEqual, RelEqual, nil,
			[][]string{{"memory: neither fits in 12.00 GiB per device: dp=2 needs 15.00 GiB, pp=2 13.00 GiB (stage 0 holds 13.00 GiB)"},
				{"no mesh fits in 12.00 GiB per device"}}},
		{"memory not tight: the pipeline holds less but that does not matter",
			Request{Workload: oneFrame, Devices: 2, Costs: tight, Goal: GoalThroughput},
			RelEqual, RelEqual, nil, // 28.1 vs 28 ms: within EqualPercent
			[][]string{{"pp=2 holds at most 13.00 GiB", "dp=2 15.00 GiB", "limit: none"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Plan(tc.req)
			if err != nil {
				t.Fatal(err)
			}
			v := res.Verdict
			if v.Throughput != tc.throughput || v.Latency != tc.latency {
				t.Errorf("throughput %q latency %q, want %q %q", v.Throughput, v.Latency, tc.throughput, tc.latency)
			}
			if !reflect.DeepEqual(v.PipelineOnlyFits, tc.onlyPP) {
				t.Errorf("pipeline-only fits %v, want %v", v.PipelineOnlyFits, tc.onlyPP)
			}
			for _, want := range tc.notes {
				if !hasNote(res.Notes, want...) {
					t.Errorf("no note with %q in\n%s", want, strings.Join(res.Notes, "\n"))
				}
			}
		})
	}
}

func TestPlanOrdering(t *testing.T) {
	w := small(28, 60, true)
	c := SyntheticCosts(1, 4, Link{LatencyMS: 0.1})
	tests := []struct {
		goal Goal
		want []Mesh
	}{
		// Latency: cfg 2 halves the rows, cp 2 halves the frames; each adds collectives.
		// cfg 2 and cp 2 tie (1.1 ms steps): the lower cfg goes first. cfg2 x cp2 and cp4
		// tie too (both do one all-gather over 4 per step): cp4 first.
		{GoalLatency, []Mesh{{1, 1, 4, 1}, {1, 2, 2, 1}, {1, 1, 2, 2}, {1, 2, 1, 2}, {2, 1, 2, 1}, {2, 2, 1, 1}, {1, 1, 1, 4}, {2, 1, 1, 2}, {4, 1, 1, 1}}},
		// Throughput: every rank busy every interval; collectives cost throughput; ties
		// (dp4, pp2 dp2, pp4 all at 71.4/s) go to lower latency first.
		{GoalThroughput, []Mesh{{1, 1, 1, 4}, {2, 1, 1, 2}, {4, 1, 1, 1}, {1, 1, 2, 2}, {1, 2, 1, 2}, {2, 1, 2, 1}, {2, 2, 1, 1}, {1, 1, 4, 1}, {1, 2, 2, 1}}},
	}
	for _, tc := range tests {
		res, err := Plan(Request{Workload: w, Devices: 4, Costs: c, Goal: tc.goal})
		if err != nil {
			t.Fatal(err)
		}
		if got := meshes(res.Configs); !reflect.DeepEqual(got, tc.want) {
			for _, p := range res.Configs {
				t.Logf("%v first %.3f tput %.3f", p.Mesh, p.FirstSampleMS, p.SteadyThroughputPerS)
			}
			t.Errorf("%s order %v\nwant %v", tc.goal, got, tc.want)
		}
		for i := 1; i < len(res.Configs); i++ {
			if Compare(tc.goal, res.Configs[i-1], res.Configs[i]) > 0 {
				t.Errorf("%s: %v ranked before better %v", tc.goal, res.Configs[i-1].Mesh, res.Configs[i].Mesh)
			}
		}
	}
}

func TestCompareTieBreaks(t *testing.T) {
	a := Prediction{Mesh: Mesh{1, 1, 1, 2}, FirstSampleMS: 10, SteadyThroughputPerS: 100, MemoryBytesPerDevice: 5}
	tests := []struct {
		name string
		b    Prediction
		want int // sign of Compare(goal, a, b)
	}{
		{"fewer stages wins a tie", Prediction{Mesh: Mesh{2, 1, 1, 1}, FirstSampleMS: 10, SteadyThroughputPerS: 100, MemoryBytesPerDevice: 1}, -1},
		{"lower memory wins next", Prediction{Mesh: Mesh{1, 2, 1, 1}, FirstSampleMS: 10, SteadyThroughputPerS: 100, MemoryBytesPerDevice: 4}, 1},
		{"rounding noise is a tie", Prediction{Mesh: Mesh{1, 1, 1, 2}, FirstSampleMS: 10 + 1e-12, SteadyThroughputPerS: 100, MemoryBytesPerDevice: 5}, 0},
		{"primary decides", Prediction{Mesh: Mesh{4, 1, 1, 1}, FirstSampleMS: 9, SteadyThroughputPerS: 200, MemoryBytesPerDevice: 1}, 1},
	}
	for _, tc := range tests {
		for _, g := range []Goal{GoalLatency, GoalThroughput} {
			got := Compare(g, a, tc.b)
			if (got > 0) != (tc.want > 0) || (got < 0) != (tc.want < 0) {
				t.Errorf("%s (%s): Compare = %d, want sign %d", tc.name, g, got, tc.want)
			}
		}
	}
}

func TestPlanInfeasibleAndErrors(t *testing.T) {
	c := SyntheticCosts(1, 1, Link{})
	c.Weights = Weights{Condition: 30, Denoiser: 100, Decode: 50} // dp: 180 B, pp2: 130 and 150 B
	w := Workload{Steps: 4, Samples: 2, Frames: 1, Height: 1, Width: 1, Channels: 1}
	res, err := Plan(Request{Workload: w, Devices: 2, Costs: c, MemoryPerDevice: 120, Goal: GoalLatency})
	if err != nil {
		t.Fatal(err)
	}
	if got := meshes(res.Configs); len(got) != 0 {
		t.Errorf("configs %v, want none", got)
	}
	if got := meshes(res.Infeasible); !reflect.DeepEqual(got, []Mesh{{2, 1, 1, 1}, {1, 1, 1, 2}}) {
		t.Errorf("infeasible %v, want smallest memory first", got)
	}
	if !hasNote(res.Notes, "no mesh fits in 120 B per device", "pp=2 cfg=1 cp=1 dp=1", "needs 150 B") {
		t.Errorf("notes %q", res.Notes)
	}
	if !hasNote(res.Infeasible[0].Notes, "does not fit: needs 150 B per device > limit 120 B") {
		t.Errorf("mesh notes %q", res.Infeasible[0].Notes)
	}
	if _, err := Plan(Request{Workload: w, Devices: 2, Costs: c, Goal: "fast"}); !errors.Is(err, ErrBadInput) {
		t.Errorf("bad goal: %v", err)
	}
	if _, err := Plan(Request{Workload: w, Devices: 0, Costs: c}); !errors.Is(err, ErrBadInput) {
		t.Errorf("0 devices: %v", err)
	}
}

func TestWriteJSONShape(t *testing.T) {
	res, err := Plan(Request{Workload: small(28, 60, false), Devices: 7, Costs: SyntheticCosts(1, 4, Link{LatencyMS: 0.1}), Goal: GoalThroughput})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteJSON(&buf, res); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Goal       string           `json:"goal"`
		Configs    []map[string]any `json:"configs"`
		Infeasible []map[string]any `json:"infeasible"`
		Notes      []string         `json:"notes"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Goal != "throughput" || len(doc.Configs) != 2 || doc.Infeasible == nil || len(doc.Notes) == 0 {
		t.Fatalf("goal %q, %d configs, infeasible %v, %d notes", doc.Goal, len(doc.Configs), doc.Infeasible, len(doc.Notes))
	}
	for _, k := range []string{"pp", "cfg", "cp", "dp", "predicted_first_sample_ms", "predicted_throughput_samples_per_s", "weight_bytes_per_device", "feasible"} {
		if _, ok := doc.Configs[0][k]; !ok {
			t.Errorf("config lacks %q: %v", k, doc.Configs[0])
		}
	}
	if doc.Configs[0]["dp"].(float64) != 7 || doc.Configs[1]["pp"].(float64) != 7 {
		t.Errorf("order: %v then %v", doc.Configs[0], doc.Configs[1])
	}
	if got := doc.Configs[1]["predicted_throughput_samples_per_s"].(float64); !near(got, 250) {
		t.Errorf("pp7 throughput %v", got)
	}
	// dp7 finishes in bursts of 7: bench's window over all 60 completions (no warm-up) is
	// 59 samples in 8 intervals of 28 ms, above the steady 250/s.
	if got := doc.Configs[0]["predicted_throughput_samples_per_s"].(float64); !near(got, 59/(8*28.0)*1e3) {
		t.Errorf("dp7 window throughput %v", got)
	}
	if got := doc.Configs[0]["predicted_steady_throughput_samples_per_s"].(float64); !near(got, 250) {
		t.Errorf("dp7 steady throughput %v", got)
	}
	var tbl bytes.Buffer
	if err := WriteTable(&tbl, res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| 1 | pp=1 cfg=1 cp=1 dp=7 | 28.00 | 250.0 | 263.4 | 4.00 | 0 B | yes |", "| 2 | pp=7 cfg=1 cp=1 dp=1 | 28.60 | 250.0 |", "- throughput: data parallelism equals"} {
		if !strings.Contains(tbl.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, tbl.String())
		}
	}
}

// A distilled job (4 unguided steps) leaves no CFG branch and few steps: the plan says so
// and names what it picks instead; a long guided job gets no such note.
func TestPlanShortUnguidedJob(t *testing.T) {
	syn := SyntheticCosts(5, 4, Link{LatencyMS: 0.1})
	res, err := Plan(Request{Workload: small(4, 60, false), Devices: 4, Costs: syn, Goal: GoalThroughput})
	if err != nil {
		t.Fatal(err)
	}
	best, _ := res.Best()
	if best.CFG != 1 || !hasNote(res.Notes, "a 4-step unguided job has no CFG branch to split", "only 4 steps to pipeline", "for throughput the plan picks "+best.Mesh.String()) {
		t.Fatalf("best %v, notes %q", best.Mesh, res.Notes)
	}
	res, err = Plan(Request{Workload: small(28, 60, true), Devices: 4, Costs: syn, Goal: GoalThroughput})
	if err != nil {
		t.Fatal(err)
	}
	if hasNote(res.Notes, "CFG branch to split") || hasNote(res.Notes, "steps to pipeline") {
		t.Fatalf("a 28-step guided job: %q", res.Notes)
	}
}

// A slow model's throughput keeps three significant digits ("0.0928", not "0.1").
func TestRate(t *testing.T) {
	for v, want := range map[float64]string{0.0928: "0.0928", 0.56: "0.560", 5.234: "5.23", 71.43: "71.4", 250: "250.0", 0: "0.0"} {
		if got := rate(v); got != want {
			t.Errorf("rate(%v) = %q, want %q", v, got, want)
		}
	}
}
