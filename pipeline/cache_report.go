package pipeline

import (
	"slices"
)

// CacheSummary is one sample's step cache as report.json and `vdpp bench --json` give it:
// the rule, how many calls computed in full of all, the steps where any call computed (a
// static schedule calibrated from this run: --cache static --cache-steps), and every call.
type CacheSummary struct {
	Mode      string  `json:"mode"`
	Threshold float64 `json:"threshold,omitempty"`
	Interval  int     `json:"interval,omitempty"`
	Branch    int     `json:"branch,omitempty"`
	Steps     string  `json:"steps,omitempty"`
	Drop      bool    `json:"drop,omitempty"`
	// ComputedCalls of TotalCalls ran the whole denoiser.
	ComputedCalls int `json:"computed_calls"`
	TotalCalls    int `json:"total_calls"`
	// ComputedSteps are the steps where some call computed in full ("0-2,5").
	ComputedSteps string        `json:"computed_steps"`
	Calls         []CacheRecord `json:"calls"`
	// Summary is the run's one line about its cache (CacheOutcome.Line), set by the
	// command that reports it.
	Summary string `json:"summary,omitempty"`
	// Check is the comparison with the same job run without the cache, when one ran
	// (generate --cache-check).
	Check *CacheCheck `json:"check,omitempty"`
}

// CacheCheck compares a cached run's videos with the same job's uncached ones: PSNR and
// SSIM of the decoded frames (the uncached as reference), and the denoising time both ways.
type CacheCheck struct {
	PSNR       float64 `json:"psnr"`
	SSIM       float64 `json:"ssim"`
	UncachedMS float64 `json:"uncached_diffusion_ms"`
	CachedMS   float64 `json:"cached_diffusion_ms"`
}

// Summarize returns the summary of one sample's records under rule.
func Summarize(rule Cache, records []CacheRecord) CacheSummary {
	s := CacheSummary{Mode: rule.Mode, Threshold: rule.Threshold, Interval: rule.Interval, Branch: rule.Branch,
		Steps: FormatSteps(rule.Steps), Drop: rule.Drop, TotalCalls: len(records), Calls: records}
	var steps []int
	for _, r := range records {
		if r.Computed {
			s.ComputedCalls++
			if len(steps) == 0 || steps[len(steps)-1] != r.Step {
				steps = append(steps, r.Step)
			}
		}
	}
	slices.Sort(steps)
	s.ComputedSteps = FormatSteps(slices.Compact(steps))
	return s
}
