package pipeline

import (
	"errors"
	"fmt"
	"math"
	"testing"
)

func TestCutStages(t *testing.T) {
	ones := func(n int) []float64 {
		c := make([]float64, n)
		for i := range c {
			c[i] = 1
		}
		return c
	}
	tests := []struct {
		steps, k int
		cuts     []int
		want     string
	}{
		{6, 1, []int{2}, "[[0,6)]"},             // one stage holds both experts
		{6, 2, []int{2}, "[[0,2) [2,6)]"},       // the cut sits on the switch
		{6, 3, []int{2}, "[[0,2) [2,4) [4,6)]"}, // the rest balanced
		{6, 4, []int{2}, "[[0,2) [2,4) [4,5) [5,6)]"},
		{50, 2, []int{10}, "[[0,10) [10,50)]"},
		{50, 4, []int{10}, "[[0,10) [10,24) [24,37) [37,50)]"},
		{8, 2, nil, "[[0,4) [4,8)]"},         // no switch: BalanceStages
		{8, 2, []int{0, 8}, "[[0,4) [4,8)]"}, // switches outside the run are ignored
	}
	for _, tc := range tests {
		got, err := CutStages(ones(tc.steps), tc.k, tc.cuts, nil)
		if err != nil {
			t.Fatal(err)
		}
		if s := fmt.Sprint(got); s != tc.want {
			t.Errorf("CutStages(%d, %d, %v) = %s, want %s", tc.steps, tc.k, tc.cuts, s, tc.want)
		}
		if err := ValidatePlan(got, tc.steps); err != nil {
			t.Error(err)
		}
	}
	if _, err := CutStages(ones(2), 3, []int{1}, nil); err == nil {
		t.Error("3 stages for 2 steps: want an error")
	}
}

func TestCutStagesDecodeAware(t *testing.T) {
	ones := func(n int) []float64 {
		c := make([]float64, n)
		for i := range c {
			c[i] = 1
		}
		return c
	}
	tests := []struct {
		name              string
		steps, k          int
		cuts              []int
		condition, decode float64 // in steps, per item
		decodeRanks       int
		want              string
	}{
		{"no decode cost: even", 16, 2, nil, 0, 0, 1, "[[0,8) [8,16)]"},
		{"decode of 2 steps on the last", 16, 2, nil, 0, 2, 1, "[[0,9) [9,16)]"},
		{"decode of 14 steps on the last", 16, 2, nil, 0, 14, 1, "[[0,15) [15,16)]"},
		{"decode larger than the run: one step left", 16, 2, nil, 0, 100, 1, "[[0,15) [15,16)]"},
		{"decode spread over both: even", 16, 2, nil, 0, 14, 2, "[[0,8) [8,16)]"},
		{"spread over the last 2 of 3", 12, 3, nil, 0, 6, 2, "[[0,6) [6,9) [9,12)]"},
		{"conditioning on the first", 16, 2, nil, 4, 0, 1, "[[0,6) [6,16)]"},
		{"conditioning and decode cancel", 16, 2, nil, 4, 4, 1, "[[0,8) [8,16)]"},
		{"switch respected", 8, 2, []int{3}, 0, 10, 1, "[[0,3) [3,8)]"},
		{"switch and decode", 20, 3, []int{10}, 0, 6, 1, "[[0,10) [10,18) [18,20)]"},
		{"fewer stages than segments", 8, 1, []int{3, 5}, 0, 5, 1, "[[0,8)]"},
	}
	for _, tc := range tests {
		extra := StageExtras(tc.k, tc.condition, 0, tc.decode, tc.decodeRanks)
		got, err := CutStages(ones(tc.steps), tc.k, tc.cuts, extra)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if s := fmt.Sprint(got); s != tc.want {
			t.Errorf("%s: CutStages = %s, want %s", tc.name, s, tc.want)
		}
		if err := ValidatePlan(got, tc.steps); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		for _, c := range tc.cuts {
			if c <= 0 || c >= tc.steps || tc.k < len(tc.cuts)+1 {
				continue
			}
			found := false
			for _, r := range got {
				found = found || r.Start == c
			}
			if !found {
				t.Errorf("%s: no stage boundary at switch %d: %s", tc.name, c, got)
			}
		}
	}
}

// A decode cost of 0 gives exactly the cut without one, for every size and switch.
func TestCutStagesZeroDecodeUnchanged(t *testing.T) {
	for steps := 1; steps <= 20; steps++ {
		cost := make([]float64, steps)
		for i := range cost {
			cost[i] = 1
		}
		for k := 1; k <= min(steps, 6); k++ {
			for _, cuts := range [][]int{nil, {steps / 2}, {steps / 3, 2 * steps / 3}} {
				want, err := CutStages(cost, k, cuts, nil)
				if err != nil {
					t.Fatal(err)
				}
				for ranks := 0; ranks <= k; ranks++ {
					extra := StageExtras(k, 0, 0, 0, ranks)
					got, err := CutStages(cost, k, cuts, extra)
					if err != nil {
						t.Fatal(err)
					}
					if fmt.Sprint(got) != fmt.Sprint(want) {
						t.Errorf("steps %d k %d cuts %v ranks %d: %s, want %s", steps, k, cuts, ranks, got, want)
					}
					if zeros := make([]float64, k); fmt.Sprint(must(CutStages(cost, k, cuts, zeros))) != fmt.Sprint(want) {
						t.Errorf("steps %d k %d cuts %v: explicit zero extras changed the cut", steps, k, cuts)
					}
				}
				if len(cuts) == 0 {
					even, _ := EvenStages(steps, k)
					if fmt.Sprint(even) != fmt.Sprint(want) {
						t.Errorf("steps %d k %d: %s, want EvenStages %s", steps, k, want, even)
					}
				}
			}
		}
	}
}

func must(p []Range, err error) []Range {
	if err != nil {
		panic(err)
	}
	return p
}

func TestCutStagesBadExtras(t *testing.T) {
	cost := []float64{1, 1, 1, 1}
	for _, extra := range [][]float64{{1}, {0, -1}, {0, math.NaN()}} {
		if _, err := CutStages(cost, 2, nil, extra); !errors.Is(err, ErrBadPlan) {
			t.Errorf("extras %v: err %v, want ErrBadPlan", extra, err)
		}
	}
}

func TestStageExtras(t *testing.T) {
	if e := StageExtras(3, 0, 0, 0, 2); e != nil {
		t.Errorf("all zero: %v, want nil", e)
	}
	if e := fmt.Sprint(StageExtras(4, 1, 0.5, 6, 3)); e != "[1 2 2 2.5]" {
		t.Errorf("got %s", e)
	}
	if e := fmt.Sprint(StageExtras(2, 0, 0, 6, 5)); e != "[3 3]" { // clamped to the stages
		t.Errorf("got %s", e)
	}
	if e := fmt.Sprint(StageExtras(2, 0, 0, 6, 0)); e != "[0 6]" { // 0: the last stage alone
		t.Errorf("got %s", e)
	}
}
