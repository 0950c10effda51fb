package pipeline

import (
	"math"
	"slices"
)

// CutStages cuts len(stepCost) steps into k stages as BalanceStages does, with a stage
// boundary at each of cuts: the steps where the denoiser changes (a two-expert model's
// switch), so that no stage runs steps of two segments and each stage loads one denoiser.
// The k stages are shared among the segments so that the most expensive stage is as cheap
// as possible (then the smallest sum of squared stage costs), and each segment is cut by
// BalanceStages. With fewer stages than segments it returns BalanceStages' plan (some
// stage then spans a switch); cuts outside (0, steps) are ignored.
func CutStages(stepCost []float64, k int, cuts []int) ([]Range, error) {
	n := len(stepCost)
	if err := checkCut(n, k); err != nil {
		return nil, err
	}
	bounds := []int{0}
	for _, c := range slices.Sorted(slices.Values(cuts)) {
		if c > bounds[len(bounds)-1] && c < n {
			bounds = append(bounds, c)
		}
	}
	bounds = append(bounds, n)
	segs := len(bounds) - 1
	if segs == 1 || k < segs {
		return BalanceStages(stepCost, k, nil)
	}
	best := struct {
		plan     []Range
		max, sq  float64
		assigned bool
	}{}
	alloc := make([]int, segs)
	var try func(i, left int)
	try = func(i, left int) {
		if i == segs-1 {
			alloc[i] = left
			if left < 1 || left > bounds[i+1]-bounds[i] {
				return
			}
			var plan []Range
			for s := range segs {
				part, err := BalanceStages(stepCost[bounds[s]:bounds[s+1]], alloc[s], nil)
				if err != nil {
					return
				}
				for _, r := range part {
					plan = append(plan, Range{r.Start + bounds[s], r.End + bounds[s]})
				}
			}
			mx, sq := 0.0, 0.0
			for _, c := range StageCosts(plan, stepCost) {
				mx, sq = math.Max(mx, c), sq+c*c
			}
			if !best.assigned || mx < best.max && !nearlyEqual(mx, best.max) || nearlyEqual(mx, best.max) && sq < best.sq && !nearlyEqual(sq, best.sq) {
				best.plan, best.max, best.sq, best.assigned = plan, mx, sq, true
			}
			return
		}
		for a := 1; a <= left-(segs-1-i) && a <= bounds[i+1]-bounds[i]; a++ {
			alloc[i] = a
			try(i+1, left-a)
		}
	}
	try(0, k)
	if !best.assigned {
		return BalanceStages(stepCost, k, nil)
	}
	return best.plan, nil
}
