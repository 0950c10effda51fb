package pipeline

import (
	"fmt"
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
		got, err := CutStages(ones(tc.steps), tc.k, tc.cuts)
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
	if _, err := CutStages(ones(2), 3, []int{1}); err == nil {
		t.Error("3 stages for 2 steps: want an error")
	}
}
