package pipeline

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// CacheOutcome is what a cached run reports about its cache in one line (Line): every
// sample's summary, the run's time, and what is known of the uncached run.
type CacheOutcome struct {
	// Samples are the samples' summaries (Summarize), one per sample.
	Samples []CacheSummary
	// Steps is the run's number of denoising steps per sample.
	Steps int
	// DenoiseMS is the cached run's denoising time, all samples together (ms).
	DenoiseMS float64
	// UncachedMS is the same denoising without the cache when it was measured (bench, and
	// generate --cache-check); 0 estimates it from ReuseFraction.
	UncachedMS float64
	// ReuseFraction is a reusing call's cost as a fraction of a computing one's (the
	// family's cost model), for the estimate.
	ReuseFraction float64
	// PSNR and SSIM compare the decoded videos with the uncached run's (generate
	// --cache-check, eval --cache); both 0 when not measured.
	PSNR, SSIM float64
	// CheckHint, when set, follows the latent change: how to measure PSNR/SSIM instead
	// ("--cache-check measures PSNR/SSIM").
	CheckHint string
}

// calls counts the computed and total calls, and the computed and total steps.
func (o CacheOutcome) calls() (computed, total, steps, totalSteps int) {
	for _, s := range o.Samples {
		computed += s.ComputedCalls
		total += s.TotalCalls
		if st, err := ParseSteps(s.ComputedSteps); err == nil {
			steps += len(st)
		}
		totalSteps += o.Steps
	}
	return computed, total, steps, totalSteps
}

// Saved returns the denoising time the cache saved (ms) and whether it was measured (else
// estimated from the calls and ReuseFraction).
func (o CacheOutcome) Saved() (ms float64, measured bool) {
	if o.UncachedMS > 0 {
		return o.UncachedMS - o.DenoiseMS, true
	}
	computed, total, _, _ := o.calls()
	work := float64(computed) + float64(total-computed)*o.ReuseFraction
	if work <= 0 || o.DenoiseMS <= 0 {
		return 0, false
	}
	return o.DenoiseMS*float64(total)/work - o.DenoiseMS, false
}

// Changes returns the latent changes (CacheRecord.Change) of every reused call that
// measured one.
func (o CacheOutcome) Changes() []float64 {
	var out []float64
	for _, s := range o.Samples {
		for _, r := range s.Calls {
			if !r.Computed && !math.IsNaN(float64(r.Change)) {
				out = append(out, float64(r.Change))
			}
		}
	}
	return out
}

// SuggestThreshold returns, for an adaptive rule that reused nothing, a threshold above a
// quarter of the indicator values this run compared (the values a call is judged by), and
// how many of its calls had values below it; ok is false when no call compared a value.
// The count is indicative: after a reuse the next call compares with an older state.
func (o CacheOutcome) SuggestThreshold() (threshold float64, below, compared int, ok bool) {
	var vals []float64
	for _, s := range o.Samples {
		for _, r := range s.Calls {
			if v := float64(r.Value); !math.IsNaN(v) && v > 0 {
				vals = append(vals, v)
			}
		}
	}
	if len(vals) == 0 {
		return 0, 0, 0, false
	}
	slices.Sort(vals)
	q := vals[(len(vals)-1)/4]
	// Round up to two significant digits, so the value reads well and lies above q.
	scale := math.Pow(10, math.Floor(math.Log10(q))-1)
	threshold = math.Ceil(q/scale*(1+1e-9)) * scale
	if threshold <= q {
		threshold += scale
	}
	for _, v := range vals {
		if v < threshold {
			below++
		}
	}
	return threshold, below, len(vals), true
}

// Line is the one line a cached run prints: the rule, the calls and steps computed of all,
// the denoising time saved (measured, "none saved" when the uncached run was faster, or
// estimated from the family's cost model), and the
// quality cost (PSNR/SSIM against the uncached run when measured, else the latent change at
// the reuses). A run that reused nothing says so and, for an adaptive rule, suggests the
// threshold that would have.
func (o CacheOutcome) Line() string {
	if len(o.Samples) == 0 {
		return ""
	}
	s0 := o.Samples[0]
	var b strings.Builder
	b.WriteString("cache " + describeRule(s0))
	computed, total, steps, totalSteps := o.calls()
	if computed == total {
		fmt.Fprintf(&b, ": computed all %d calls, nothing saved", total)
		if s0.Mode == CacheFB {
			if th, below, n, ok := o.SuggestThreshold(); ok {
				fmt.Fprintf(&b, "; --cache-threshold %s would have reused about %d of the %d calls that compared (indicator %s to %s this run)",
					strconv.FormatFloat(th, 'g', -1, 64), below, n, g3(o.minValue()), g3(o.maxValue()))
			}
		}
		return b.String()
	}
	fmt.Fprintf(&b, ": computed %d of %d calls, %d of %d steps", computed, total, steps, totalSteps)
	if saved, measured := o.Saved(); o.DenoiseMS > 0 && measured && saved < 0 {
		// The measured uncached run was faster: the reuses did not pay for the cache's own
		// work (or the timing was noise); no negative saving is printed.
		fmt.Fprintf(&b, "; denoising %s, none saved: the uncached run took %s", seconds(o.DenoiseMS), seconds(o.UncachedMS))
	} else if o.DenoiseMS > 0 {
		base := o.DenoiseMS + saved
		how := "about "
		if measured {
			how = ""
		}
		fmt.Fprintf(&b, "; denoising %s, %s%s saved (%.0f%%", seconds(o.DenoiseMS), how, seconds(saved), 100*saved/base)
		if !measured {
			b.WriteString(", estimated")
		}
		b.WriteString(")")
	}
	switch ch := o.Changes(); {
	case o.PSNR > 0 || o.SSIM > 0:
		fmt.Fprintf(&b, "; vs uncached: PSNR %.2f dB, SSIM %.4f", o.PSNR, o.SSIM)
	case len(ch) > 0:
		fmt.Fprintf(&b, "; latent change at the %d reuses: max %s, mean %s", len(ch), g3(slices.Max(ch)), g3(mean(ch)))
		if o.CheckHint != "" {
			b.WriteString(" (" + o.CheckHint + ")")
		}
	}
	return b.String()
}

// describeRule is a summary's rule in flag words: "fbcache (threshold 0.1)".
func describeRule(s CacheSummary) string {
	var parts []string
	switch s.Mode {
	case CacheFB:
		parts = append(parts, "threshold "+strconv.FormatFloat(s.Threshold, 'g', -1, 64))
	case CacheDeep:
		parts = append(parts, fmt.Sprintf("interval %d, branch %d", s.Interval, s.Branch))
	case CacheStatic:
		if s.Steps != "" {
			parts = append(parts, "steps "+s.Steps)
		} else if s.Interval > 0 {
			parts = append(parts, fmt.Sprintf("interval %d", s.Interval))
		}
	}
	if len(parts) == 0 {
		return s.Mode
	}
	return s.Mode + " (" + strings.Join(parts, ", ") + ")"
}

func (o CacheOutcome) minValue() float64 { return o.valueBound(math.Min, math.Inf(1)) }
func (o CacheOutcome) maxValue() float64 { return o.valueBound(math.Max, math.Inf(-1)) }

func (o CacheOutcome) valueBound(f func(a, b float64) float64, start float64) float64 {
	v := start
	for _, s := range o.Samples {
		for _, r := range s.Calls {
			if x := float64(r.Value); !math.IsNaN(x) {
				v = f(v, x)
			}
		}
	}
	return v
}

func mean(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// g3 formats v with three significant digits.
func g3(v float64) string { return strconv.FormatFloat(v, 'g', 3, 64) }

// seconds formats ms as seconds ("1.25 s").
func seconds(ms float64) string { return fmt.Sprintf("%.2f s", ms/1000) }
