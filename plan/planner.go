package plan

import (
	"fmt"
	"math"
	"slices"
)

// Goal is what the planner ranks meshes by.
type Goal string

// Goals.
const (
	// GoalLatency ranks by first-sample latency (then throughput).
	GoalLatency Goal = "latency"
	// GoalThroughput ranks by steady throughput (then first-sample latency).
	GoalThroughput Goal = "throughput"
)

// ParseGoal accepts "latency" or "throughput".
func ParseGoal(s string) (Goal, error) {
	switch g := Goal(s); g {
	case GoalLatency, GoalThroughput:
		return g, nil
	}
	return "", fmt.Errorf("%w: goal %q (want latency or throughput)", ErrBadInput, s)
}

// Request is everything the planner needs.
type Request struct {
	Workload Workload
	Devices  int
	// MemoryPerDevice bounds each device's memory in bytes; <= 0 means no limit.
	MemoryPerDevice int64
	Costs           Costs
	Goal            Goal
}

// Result is the planner's answer.
type Result struct {
	Goal     Goal     `json:"goal"`
	Workload Workload `json:"workload"`
	Devices  int      `json:"devices"`
	// MemoryPerDevice is the limit the meshes were checked against (0: none).
	MemoryPerDevice int64 `json:"memory_per_device"`
	Costs           Costs `json:"costs"`
	// Configs are the feasible meshes, best first for Goal.
	Configs []Prediction `json:"configs"`
	// Infeasible are the meshes that do not fit in MemoryPerDevice, smallest memory first.
	Infeasible []Prediction `json:"infeasible"`
	Verdict    Verdict      `json:"verdict"`
	// Notes say in words what the numbers show (see Verdict).
	Notes []string `json:"notes"`
}

// Best returns the best feasible mesh, and false when none fits.
func (r Result) Best() (Prediction, bool) {
	if len(r.Configs) == 0 {
		return Prediction{}, false
	}
	return r.Configs[0], true
}

// Plan predicts every mesh of req.Devices devices, ranks the feasible ones for req.Goal,
// and writes the verdict and notes. It is pure: the same request gives the same result.
func Plan(req Request) (Result, error) {
	goal := req.Goal
	if goal == "" {
		goal = GoalThroughput
	}
	if _, err := ParseGoal(string(goal)); err != nil {
		return Result{}, err
	}
	if err := req.Costs.Validate(); err != nil {
		return Result{}, err
	}
	meshes, err := Enumerate(req.Workload, req.Devices)
	if err != nil {
		return Result{}, err
	}
	res := Result{Goal: goal, Workload: req.Workload, Devices: req.Devices, MemoryPerDevice: max(0, req.MemoryPerDevice), Costs: req.Costs}
	var all []Prediction
	for _, m := range meshes {
		p, err := Predict(req.Workload, m, req.Costs, req.MemoryPerDevice)
		if err != nil {
			return Result{}, err
		}
		p.Notes = meshNotes(req, p)
		all = append(all, p)
		if p.Feasible {
			res.Configs = append(res.Configs, p)
		} else {
			res.Infeasible = append(res.Infeasible, p)
		}
	}
	slices.SortStableFunc(res.Configs, func(a, b Prediction) int { return Compare(goal, a, b) })
	slices.SortStableFunc(res.Infeasible, func(a, b Prediction) int {
		if a.MemoryBytesPerDevice != b.MemoryBytesPerDevice {
			return cmpInt64(a.MemoryBytesPerDevice, b.MemoryBytesPerDevice)
		}
		return Compare(goal, a, b)
	})
	res.Verdict = judge(req, all)
	res.Notes = verdictNotes(req, res, all)
	return res, nil
}

// Compare orders two predictions for goal: negative when a is better. Latency: lower
// first-sample latency, then higher steady throughput; throughput: the reverse. It uses the
// steady rate, not the benchmark window's (which depends on how the warm-up cut falls). Ties (within a
// relative 1e-9) go to fewer pipeline stages, then lower memory per device, then the
// smaller (pp, cfg, cp, dp) in order, so the ranking is deterministic.
func Compare(goal Goal, a, b Prediction) int {
	lat := cmpFloat(a.FirstSampleMS, b.FirstSampleMS)
	tput := -cmpFloat(a.SteadyThroughputPerS, b.SteadyThroughputPerS)
	primary, secondary := tput, lat
	if goal == GoalLatency {
		primary, secondary = lat, tput
	}
	for _, c := range []int{primary, secondary, a.PP - b.PP, cmpInt64(a.MemoryBytesPerDevice, b.MemoryBytesPerDevice),
		a.CFG - b.CFG, a.CP - b.CP, a.DP - b.DP} {
		if c != 0 {
			return c
		}
	}
	return 0
}

// cmpFloat compares with a relative tolerance of 1e-9, so that sums of the same costs
// taken in a different order compare equal.
func cmpFloat(a, b float64) int {
	if math.Abs(a-b) <= 1e-9*max(1, math.Abs(a), math.Abs(b)) {
		return 0
	}
	if a < b {
		return -1
	}
	return 1
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
