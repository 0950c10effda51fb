package pipeline

import (
	"fmt"
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
//
// stageExtra, when not nil, adds a fixed cost to stage i in the units of stepCost (see
// StageExtras: conditioning on the first stage, a share of the decode on the decoding
// stages), so the steps are cut around it; nil (or all zeros) gives the cut by step cost
// alone. The planner (plan.Predict) and the engine (family.Resolved.StagePlan) both cut
// with this function, so the stage costs the planner predicts are those of the cut run.
func CutStages(stepCost []float64, k int, cuts []int, stageExtra []float64) ([]Range, error) {
	n := len(stepCost)
	if err := checkCut(n, k); err != nil {
		return nil, err
	}
	if stageExtra != nil && len(stageExtra) != k {
		return nil, fmt.Errorf("%w: %d stage extras for %d stages", ErrBadPlan, len(stageExtra), k)
	}
	for i, c := range stageExtra {
		if c < 0 || math.IsNaN(c) || math.IsInf(c, 0) {
			return nil, fmt.Errorf("%w: stage %d has extra cost %v", ErrBadPlan, i, c)
		}
	}
	extraOf := func(from, to int) []float64 {
		if stageExtra == nil {
			return nil
		}
		return stageExtra[from:to]
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
		return BalanceStages(stepCost, k, stageExtra)
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
				part, err := BalanceStages(stepCost[bounds[s]:bounds[s+1]], alloc[s], extraOf(len(plan), len(plan)+alloc[s]))
				if err != nil {
					return
				}
				for _, r := range part {
					plan = append(plan, Range{r.Start + bounds[s], r.End + bounds[s]})
				}
			}
			mx, sq := 0.0, 0.0
			for st, c := range StageCosts(plan, stepCost) {
				if stageExtra != nil {
					c += stageExtra[st]
				}
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
		return BalanceStages(stepCost, k, stageExtra)
	}
	return best.plan, nil
}

// StageExtras returns the fixed per-item costs of k stages that a cut balances against
// the steps: first on the first stage (conditioning), last on the last (finishing work
// other than the decode), and decode (one item's decode) shared evenly by the last
// decodeRanks stages (clamped to [1, k]), as pipeline.Spread shares the parts. All costs
// are in the units of the step costs the cut uses. It returns nil when every extra is 0,
// so that the cut is then exactly the cut by step cost alone.
func StageExtras(k int, first, last, decode float64, decodeRanks int) []float64 {
	if k < 1 || first == 0 && last == 0 && decode == 0 {
		return nil
	}
	extra := make([]float64, k)
	extra[0] += first
	extra[k-1] += last
	n := min(max(1, decodeRanks), k)
	for s := k - n; s < k; s++ {
		extra[s] += decode / float64(n)
	}
	return extra
}
