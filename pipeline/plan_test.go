package pipeline

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
)

func sizes(plan []Range) []int {
	out := make([]int, len(plan))
	for i, r := range plan {
		out[i] = r.Len()
	}
	return out
}

func TestEvenStages(t *testing.T) {
	tests := []struct {
		steps, k int
		want     []int
	}{
		{25, 7, []int{4, 4, 4, 4, 3, 3, 3}},
		{28, 7, []int{4, 4, 4, 4, 4, 4, 4}},
		{7, 7, []int{1, 1, 1, 1, 1, 1, 1}},
		{10, 3, []int{4, 3, 3}},
		{1, 1, []int{1}},
		{30, 4, []int{8, 8, 7, 7}},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%d/%d", tc.steps, tc.k), func(t *testing.T) {
			plan, err := EvenStages(tc.steps, tc.k)
			if err != nil {
				t.Fatal(err)
			}
			if got := sizes(plan); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("sizes %v, want %v", got, tc.want)
			}
			if err := ValidatePlan(plan, tc.steps); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestEvenStagesErrors(t *testing.T) {
	for _, tc := range []struct{ steps, k int }{{3, 4}, {5, 0}, {0, 1}} {
		if _, err := EvenStages(tc.steps, tc.k); !errors.Is(err, ErrBadPlan) {
			t.Errorf("EvenStages(%d,%d) error %v, want ErrBadPlan", tc.steps, tc.k, err)
		}
	}
}

func TestBalanceStagesEqualCostsMatchesEven(t *testing.T) {
	for s := 1; s <= 30; s++ {
		for k := 1; k <= s && k <= 9; k++ {
			costs := make([]float64, s)
			for i := range costs {
				costs[i] = 1.5
			}
			got, err := BalanceStages(costs, k, nil)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := EvenStages(s, k)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("S=%d K=%d: balanced %v, even %v", s, k, got, want)
			}
		}
	}
}

func TestBalanceStagesUnequal(t *testing.T) {
	tests := []struct {
		name  string
		costs []float64
		k     int
		extra []float64
		want  []int
	}{
		// One expensive step gets a stage of its own.
		{"heavy first", []float64{6, 1, 1, 1, 1, 1, 1}, 2, nil, []int{1, 6}},
		{"heavy last", []float64{1, 1, 1, 1, 1, 1, 6}, 2, nil, []int{6, 1}},
		// Decode cost on the last stage pushes steps forward.
		{"decode extra", []float64{1, 1, 1, 1, 1, 1, 1, 1}, 2, []float64{0, 4}, []int{6, 2}},
		{"conditioning extra", []float64{1, 1, 1, 1, 1, 1, 1, 1}, 2, []float64{4, 0}, []int{2, 6}},
		{"ramp", []float64{1, 2, 3, 4, 5, 6}, 3, nil, []int{3, 2, 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := BalanceStages(tc.costs, tc.k, tc.extra)
			if err != nil {
				t.Fatal(err)
			}
			if got := sizes(plan); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("sizes %v, want %v (costs %v)", got, tc.want, StageCosts(plan, tc.costs))
			}
		})
	}
}

// The balanced cut's bottleneck is never worse than any other cut's (checked exhaustively).
func TestBalanceStagesIsOptimal(t *testing.T) {
	costs := []float64{3, 1, 4, 1, 5, 9, 2, 6, 5, 3}
	for k := 1; k <= 5; k++ {
		plan, err := BalanceStages(costs, k, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := maxOf(StageCosts(plan, costs))
		best := bruteBottleneck(costs, k)
		if got != best {
			t.Fatalf("k=%d: bottleneck %v, optimum %v", k, got, best)
		}
	}
}

func maxOf(xs []float64) float64 {
	m := xs[0]
	for _, x := range xs {
		if x > m {
			m = x
		}
	}
	return m
}

func bruteBottleneck(costs []float64, k int) float64 {
	if k == 1 {
		s := 0.0
		for _, c := range costs {
			s += c
		}
		return s
	}
	best := -1.0
	head := 0.0
	for i := 0; i < len(costs)-k+1; i++ {
		head += costs[i]
		rest := bruteBottleneck(costs[i+1:], k-1)
		m := head
		if rest > m {
			m = rest
		}
		if best < 0 || m < best {
			best = m
		}
	}
	return best
}

func TestBalanceStagesRejects(t *testing.T) {
	if _, err := BalanceStages([]float64{1, -1}, 1, nil); !errors.Is(err, ErrBadPlan) {
		t.Fatalf("negative cost: %v", err)
	}
	if _, err := BalanceStages([]float64{1, 1}, 2, []float64{1}); !errors.Is(err, ErrBadPlan) {
		t.Fatalf("wrong extras: %v", err)
	}
}

func ExampleEvenStages() {
	plan, _ := EvenStages(25, 7)
	fmt.Println(FormatPlan(plan))
	// Output: stage 0: steps [0,4) (4) | stage 1: steps [4,8) (4) | stage 2: steps [8,12) (4) | stage 3: steps [12,16) (4) | stage 4: steps [16,19) (3) | stage 5: steps [19,22) (3) | stage 6: steps [22,25) (3)
}
