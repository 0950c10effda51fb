package plan

import (
	"fmt"
	"strings"
	"testing"
)

// A two-expert model: dp holds both experts on every device, pp=2 cut at the switch one;
// with memory for one expert only the pipeline fits, and the verdict says so.
func TestPredictExperts(t *testing.T) {
	c := SyntheticCosts(1, 4, Link{})
	c.Weights = Weights{Denoiser: 300, Experts: []int64{100, 200}, ExpertSwitches: []int{2}, Decode: 10}
	w := Workload{Steps: 6, Samples: 4, Frames: 4, Height: 8, Width: 8, Channels: 4, MicroBatch: 1}
	pp, err := Predict(w, Mesh{PP: 2, CFG: 1, CP: 1, DP: 1}, c, 250)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(pp.StageSteps) != "[[0 2] [2 6]]" || fmt.Sprint(pp.StageWeightBytes) != "[100 210]" || !pp.Feasible {
		t.Errorf("pp=2: stages %v weights %v feasible %v", pp.StageSteps, pp.StageWeightBytes, pp.Feasible)
	}
	dp, err := Predict(w, Mesh{PP: 1, CFG: 1, CP: 1, DP: 2}, c, 250)
	if err != nil {
		t.Fatal(err)
	}
	if dp.WeightBytesPerDevice != 310 || dp.Feasible {
		t.Errorf("dp=2: weights %d feasible %v", dp.WeightBytesPerDevice, dp.Feasible)
	}
	res, err := Plan(Request{Workload: w, Devices: 2, MemoryPerDevice: 250, Costs: c, Goal: GoalThroughput})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := WriteTable(&b, res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "the pipeline is the answer: a dp replica holds all 2 experts") {
		t.Errorf("verdict lacks the experts note:\n%s", b.String())
	}
	if got := c.Weights.StageDenoiser(1, 3); got != 300 {
		t.Errorf("a stage across the switch holds %d, want both experts (300)", got)
	}
}
