package plan

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
)

// WriteJSON writes r as indented JSON followed by a newline: {"goal", "configs" (feasible,
// best first), "infeasible", "verdict", "notes", ...}; every config carries pp, cfg, cp, dp,
// predicted_first_sample_ms, predicted_throughput_samples_per_s, weight_bytes_per_device.
func WriteJSON(w io.Writer, r Result) error {
	if r.Configs == nil {
		r.Configs = []Prediction{}
	}
	if r.Infeasible == nil {
		r.Infeasible = []Prediction{}
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("plan: encode result: %w", err)
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("plan: write result: %w", err)
	}
	return nil
}

// WriteTable writes a Markdown table of every mesh (feasible ones best first, then the
// ones that do not fit) followed by the notes.
func WriteTable(w io.Writer, r Result) error {
	var b strings.Builder
	wl := r.Workload
	fmt.Fprintf(&b, "## vdpp plan: %d devices, goal %s\n\n", r.Devices, r.Goal)
	fmt.Fprintf(&b, "**Workload:** %s, memory per device %s\n\n", wl, limit(r.MemoryPerDevice))
	if t := r.Costs.Weights.Types; len(t) > 0 {
		fmt.Fprintf(&b, "**Weights by type:** %s\n\n", TypeBytes(t))
	}
	cache := r.Costs.Cache != nil
	if cache {
		fmt.Fprintf(&b, "**Step cache:** %s; a reusing step computes %.3g of a full one; predicted speedup against the same mesh uncached\n\n", r.Costs.Cache.Rule, r.Costs.Cache.ReuseFraction)
		b.WriteString("| # | mesh | first sample (ms) | steady throughput (samples/s) | bench window (samples/s) | steady (ms/sample) | cache speedup (steady, first sample) | weights / device | feasible | notes |\n")
		b.WriteString("|---:|:---|---:|---:|---:|---:|---:|---:|:---|:---|\n")
	} else {
		b.WriteString("| # | mesh | first sample (ms) | steady throughput (samples/s) | bench window (samples/s) | steady (ms/sample) | weights / device | feasible | notes |\n")
		b.WriteString("|---:|:---|---:|---:|---:|---:|---:|:---|:---|\n")
	}
	row := func(i string, p Prediction) {
		feas := "yes"
		if !p.Feasible {
			feas = "no"
		}
		speedup := ""
		if cache {
			speedup = fmt.Sprintf(" %.2f×, %.2f× |", p.CacheSpeedup, p.CacheLatencySpeedup)
		}
		fmt.Fprintf(&b, "| %s | %v | %s | %s | %s | %s |%s %s | %s | %s |\n", i, p.Mesh, ms(p.FirstSampleMS), rate(p.SteadyThroughputPerS), rate(p.ThroughputPerS),
			ms(p.SteadySampleMS), speedup, Bytes(p.WeightBytesPerDevice), feas, strings.Join(p.Notes, "; "))
	}
	for i, p := range r.Configs {
		row(fmt.Sprint(i+1), p)
	}
	for _, p := range r.Infeasible {
		row("-", p)
	}
	if len(r.Notes) > 0 {
		b.WriteString("\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	_, err := io.WriteString(w, b.String())
	if err != nil {
		return fmt.Errorf("plan: write table: %w", err)
	}
	return nil
}

// TypeBytes formats bytes by weight type, largest first: "14.5 GB q8_0, 0.3 GB f32".
func TypeBytes(t map[string]int64) string {
	names := make([]string, 0, len(t))
	for n := range t {
		if t[n] > 0 {
			names = append(names, n)
		}
	}
	sort.Slice(names, func(i, j int) bool {
		if t[names[i]] != t[names[j]] {
			return t[names[i]] > t[names[j]]
		}
		return names[i] < names[j]
	})
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = Bytes(t[n]) + " " + n
	}
	return strings.Join(parts, ", ")
}
