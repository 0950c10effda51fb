package pipeline

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// ErrBadPlan is returned when steps cannot be cut into the requested stages.
var ErrBadPlan = errors.New("pipeline: bad stage plan")

// Range is the half-open step interval [Start, End) that one stage runs.
type Range struct{ Start, End int }

// Len returns the number of steps in the range.
func (r Range) Len() int { return r.End - r.Start }

// String formats the range as "a-b" with b exclusive.
func (r Range) String() string { return fmt.Sprintf("[%d,%d)", r.Start, r.End) }

// EvenStages cuts steps into k contiguous ranges whose sizes differ by at most one, the
// larger ranges first (25 steps on 7 stages: 4,4,4,4,3,3,3). It needs steps >= k >= 1.
func EvenStages(steps, k int) ([]Range, error) {
	if err := checkCut(steps, k); err != nil {
		return nil, err
	}
	base, extra := steps/k, steps%k
	out := make([]Range, k)
	start := 0
	for i := range out {
		n := base
		if i < extra {
			n++
		}
		out[i] = Range{start, start + n}
		start += n
	}
	return out, nil
}

func checkCut(steps, k int) error {
	if k < 1 {
		return fmt.Errorf("%w: %d stages", ErrBadPlan, k)
	}
	if steps < k {
		return fmt.Errorf("%w: %d steps cannot fill %d stages (need steps >= stages)", ErrBadPlan, steps, k)
	}
	return nil
}

// BalanceStages cuts len(stepCost) steps into k contiguous non-empty ranges so that the most
// expensive stage is as cheap as possible; among such cuts it takes the one with the smallest
// sum of squared stage costs, and then the one with larger stages first. stageExtra, when
// not nil, adds a fixed cost to stage i (conditioning on the first stage, decoding on the
// last). With equal step costs and no extras the result equals EvenStages.
func BalanceStages(stepCost []float64, k int, stageExtra []float64) ([]Range, error) {
	s := len(stepCost)
	if err := checkCut(s, k); err != nil {
		return nil, err
	}
	if stageExtra != nil && len(stageExtra) != k {
		return nil, fmt.Errorf("%w: %d stage extras for %d stages", ErrBadPlan, len(stageExtra), k)
	}
	for i, c := range stepCost {
		if c < 0 || math.IsNaN(c) || math.IsInf(c, 0) {
			return nil, fmt.Errorf("%w: step %d has cost %v", ErrBadPlan, i, c)
		}
	}
	prefix := make([]float64, s+1)
	for i, c := range stepCost {
		prefix[i+1] = prefix[i] + c
	}
	extra := func(stage int) float64 {
		if stageExtra == nil {
			return 0
		}
		return stageExtra[stage]
	}
	type cell struct {
		max, sq float64
		cut     int // start step of the last stage
		ok      bool
	}
	// dp[j][i]: best cut of the first i steps into j+1 stages.
	dp := make([][]cell, k)
	for j := range dp {
		dp[j] = make([]cell, s+1)
	}
	for i := 1; i <= s; i++ {
		c := prefix[i] + extra(0)
		dp[0][i] = cell{max: c, sq: c * c, cut: 0, ok: true}
	}
	better := func(a, b cell) bool { // is a strictly better than b?
		if !b.ok {
			return true
		}
		if !nearlyEqual(a.max, b.max) {
			return a.max < b.max
		}
		if !nearlyEqual(a.sq, b.sq) {
			return a.sq < b.sq
		}
		return a.cut > b.cut // larger earlier stages
	}
	for j := 1; j < k; j++ {
		for i := j + 1; i <= s; i++ {
			var best cell
			for cut := j; cut < i; cut++ {
				prev := dp[j-1][cut]
				if !prev.ok {
					continue
				}
				c := prefix[i] - prefix[cut] + extra(j)
				cand := cell{max: math.Max(prev.max, c), sq: prev.sq + c*c, cut: cut, ok: true}
				if better(cand, best) {
					best = cand
				}
			}
			dp[j][i] = best
		}
	}
	out := make([]Range, k)
	end := s
	for j := k - 1; j >= 0; j-- {
		start := dp[j][end].cut
		out[j] = Range{start, end}
		end = start
	}
	return out, nil
}

func nearlyEqual(a, b float64) bool {
	d := math.Abs(a - b)
	return d <= 1e-9*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

// StageCosts returns the cost of each range under stepCost.
func StageCosts(plan []Range, stepCost []float64) []float64 {
	out := make([]float64, len(plan))
	for i, r := range plan {
		for s := r.Start; s < r.End; s++ {
			out[i] += stepCost[s]
		}
	}
	return out
}

// FormatPlan renders a plan for the start-up log: "stage 0: steps [0,4) (4) | stage 1: ...".
func FormatPlan(plan []Range) string {
	parts := make([]string, len(plan))
	for i, r := range plan {
		parts[i] = fmt.Sprintf("stage %d: steps %v (%d)", i, r, r.Len())
	}
	return strings.Join(parts, " | ")
}

// ValidatePlan checks that plan covers [0, steps) with contiguous non-empty ranges.
func ValidatePlan(plan []Range, steps int) error {
	if len(plan) == 0 {
		return fmt.Errorf("%w: no stages", ErrBadPlan)
	}
	next := 0
	for i, r := range plan {
		if r.Start != next || r.End <= r.Start {
			return fmt.Errorf("%w: stage %d has steps %v after step %d", ErrBadPlan, i, r, next)
		}
		next = r.End
	}
	if next != steps {
		return fmt.Errorf("%w: stages end at step %d, want %d", ErrBadPlan, next, steps)
	}
	return nil
}
