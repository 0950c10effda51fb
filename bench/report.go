package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"

	"github.com/vdpp/vdpp/pipeline"
)

// Event kinds. Kinds not listed here are allowed; they appear in traces under their own
// name and are not counted by RankAccounting.
const (
	KindCompute = "compute" // denoiser steps for one sample (or a micro-batch)
	KindSend    = "send"    // handing a latent to the next stage
	KindRecv    = "recv"    // receiving a latent from the previous stage
	KindWait    = "wait"    // blocked waiting for input
	KindDecode  = "decode"  // VAE decode (last stage)
	KindEncode  = "encode"  // conditioning: image encoder and VAE encode (stage 0)
)

// ErrBadEvent: an event has a negative rank or ends before it starts.
var ErrBadEvent = errors.New("bench: bad event")

// ErrBadReport: a report read from JSON is malformed or inconsistent.
var ErrBadReport = errors.New("bench: bad report")

// Event is one interval on one rank's timeline.
type Event struct {
	Rank int    `json:"rank"`
	Kind string `json:"kind"`
	// Sample is the sample id, or -1 when the event is not about one sample.
	Sample int64 `json:"sample"`
	// Samples lists every sample of a micro-batched compute call (optional).
	Samples []int64 `json:"samples,omitempty"`
	// Step0 and Step1 are the half-open step range [Step0, Step1) the event covers;
	// Step0 == Step1 when steps do not apply.
	Step0 int `json:"step0"`
	Step1 int `json:"step1"`
	// Start and End are Unix nanoseconds (wall clock, same host).
	Start int64 `json:"start_ns"`
	End   int64 `json:"end_ns"`
}

// Validate reports whether e can be drawn: rank >= 0 and End >= Start.
func (e Event) Validate() error {
	if e.Rank < 0 {
		return fmt.Errorf("%w: rank %d < 0 (%s)", ErrBadEvent, e.Rank, e.Kind)
	}
	if e.End < e.Start {
		return fmt.Errorf("%w: rank %d %s ends %d ns before it starts", ErrBadEvent, e.Rank, e.Kind, e.Start-e.End)
	}
	return nil
}

// RankStats is per-rank accounting over the measured window (see RankAccounting).
type RankStats struct {
	Rank         int     `json:"rank"`
	BusyFraction float64 `json:"busy_fraction"`
	ComputeMS    float64 `json:"compute_ms"`
	CommMS       float64 `json:"comm_ms"`
	WaitMS       float64 `json:"wait_ms"`
	// WeightBytes is the weight memory the rank held, Weights the same per component
	// (a two-expert model's stage lists the expert it loaded).
	WeightBytes int64            `json:"weight_bytes,omitempty"`
	Weights     map[string]int64 `json:"weights,omitempty"`
}

// Host describes the machine a benchmark ran on.
type Host struct {
	GOOS      string `json:"goos"`
	GOARCH    string `json:"goarch"`
	NumCPU    int    `json:"num_cpu"`
	GoVersion string `json:"go_version"`
}

// CurrentHost returns the Host of the running process.
func CurrentHost() Host {
	return Host{GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, NumCPU: runtime.NumCPU(), GoVersion: runtime.Version()}
}

// Report is what `vdpp bench --json FILE` writes. Times are milliseconds.
type Report struct {
	Model         string  `json:"model"`
	Command       string  `json:"command"`
	Host          Host    `json:"host"`
	NProc         int     `json:"nproc"`
	PP            int     `json:"pp"` // mesh degrees; 0 means unset
	CFG           int     `json:"cfg"`
	CP            int     `json:"cp"`
	DP            int     `json:"dp"`
	TotalSteps    int     `json:"total_steps"`
	NumSamples    int     `json:"num_samples"`
	WarmupSamples int     `json:"warmup_samples"`
	MicroBatch    int     `json:"micro_batch"`
	LatentShape   []int   `json:"latent_shape"`
	StepMS        float64 `json:"step_ms"`
	// StageSteps is the half-open step range [start, end) of each rank.
	StageSteps [][2]int `json:"stage_steps"`
	// FirstSampleMS is the time from run start to the first completion.
	FirstSampleMS float64 `json:"first_sample_ms"`
	// SteadySampleMS is the median interval between consecutive completions over the
	// measured (post-warmup) samples; see SteadyIntervalMS.
	SteadySampleMS        float64 `json:"steady_sample_ms"`
	ThroughputSamplesPerS float64 `json:"throughput_samples_per_s"`

	BaselineFirstSampleMS         float64 `json:"baseline_first_sample_ms"`
	BaselineSteadySampleMS        float64 `json:"baseline_steady_sample_ms"`
	BaselineThroughputSamplesPerS float64 `json:"baseline_throughput_samples_per_s"`

	// Speedup is BaselineSteadySampleMS / SteadySampleMS (0 when no baseline ran).
	Speedup float64 `json:"speedup"`
	// Efficiency is Speedup / NProc.
	Efficiency float64     `json:"efficiency"`
	PerRank    []RankStats `json:"per_rank"`
	// EqualToBaseline is nil when no baseline ran or no comparison was made.
	EqualToBaseline    *bool    `json:"equal_to_baseline"`
	MaxRelL2VsBaseline *float64 `json:"max_rel_l2_vs_baseline,omitempty"`
	WallMS             float64  `json:"wall_ms"`

	// Cache is the step cache rule of a cached run (--cache; "" without one), and
	// CacheSamples every sample's calls: which computed in full. ComputedCalls of
	// TotalCalls computed, over all samples.
	Cache         string        `json:"cache,omitempty"`
	CacheSamples  []SampleCache `json:"cache_samples,omitempty"`
	ComputedCalls int           `json:"computed_calls,omitempty"`
	TotalCalls    int           `json:"total_calls,omitempty"`
	// Uncached* are the same mesh's run without the cache, in the same invocation.
	// CacheSpeedup is the uncached steady ms per sample over the cached run's,
	// CacheFirstSampleSpeedup the same for the first sample's latency;
	// MaxRelL2VsUncached is the largest relative L2 of a cached final latent from the
	// uncached one.
	UncachedFirstSampleMS         float64  `json:"uncached_first_sample_ms,omitempty"`
	UncachedSteadySampleMS        float64  `json:"uncached_steady_sample_ms,omitempty"`
	UncachedThroughputSamplesPerS float64  `json:"uncached_throughput_samples_per_s,omitempty"`
	CacheSpeedup                  float64  `json:"cache_speedup,omitempty"`
	CacheFirstSampleSpeedup       float64  `json:"cache_first_sample_speedup,omitempty"`
	MaxRelL2VsUncached            *float64 `json:"max_rel_l2_vs_uncached,omitempty"`
	// CacheLine is the cache's one line (pipeline.CacheOutcome.Line): the calls and steps
	// computed, the denoising time saved over all samples at the steady rates measured
	// both ways, the latent change at the reuses.
	CacheLine string `json:"cache_summary,omitempty"`
}

// SampleCache is one sample's step cache in a report.
type SampleCache struct {
	Sample int64 `json:"sample"`
	pipeline.CacheSummary
}

// HasBaseline reports whether baseline numbers were filled in.
func (r *Report) HasBaseline() bool { return r.BaselineSteadySampleMS > 0 }

// SetTiming copies t into the run's timing fields.
func (r *Report) SetTiming(t Timing) {
	r.FirstSampleMS = t.FirstSampleMS
	r.SteadySampleMS = t.SteadySampleMS
	r.ThroughputSamplesPerS = t.ThroughputSamplesPerS
}

// SetBaselineTiming copies t into the baseline timing fields.
func (r *Report) SetBaselineTiming(t Timing) {
	r.BaselineFirstSampleMS = t.FirstSampleMS
	r.BaselineSteadySampleMS = t.SteadySampleMS
	r.BaselineThroughputSamplesPerS = t.ThroughputSamplesPerS
}

// ComputeSpeedup fills Speedup (baseline steady / steady) and Efficiency (speedup / nproc).
// Both are set to 0 when there is no baseline or no steady interval to divide by.
func (r *Report) ComputeSpeedup() {
	r.Speedup, r.Efficiency = 0, 0
	if !r.HasBaseline() || r.SteadySampleMS <= 0 {
		return
	}
	r.Speedup = r.BaselineSteadySampleMS / r.SteadySampleMS
	if r.NProc > 0 {
		r.Efficiency = r.Speedup / float64(r.NProc)
	}
}

// WriteJSON writes r as indented JSON followed by a newline.
func WriteJSON(w io.Writer, r Report) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("bench: encode report: %w", err)
	}
	b = append(b, '\n')
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("bench: write report: %w", err)
	}
	return nil
}

// ReadReport parses one JSON report (as written by WriteJSON) and validates it. Unknown
// fields are ignored so that older readers accept newer reports.
func ReadReport(rd io.Reader) (Report, error) {
	var r Report
	dec := json.NewDecoder(rd)
	if err := dec.Decode(&r); err != nil {
		return Report{}, fmt.Errorf("%w: decode: %w", ErrBadReport, err)
	}
	if dec.More() {
		return Report{}, fmt.Errorf("%w: trailing data after the report", ErrBadReport)
	}
	if err := r.Validate(); err != nil {
		return Report{}, err
	}
	return r, nil
}

// Validate checks the report's internal consistency: non-negative counts, stage ranges
// inside [0, TotalSteps], per-rank entries naming ranks below NProc, finite numbers.
func (r *Report) Validate() error {
	ints := []struct {
		name string
		v    int
	}{{"nproc", r.NProc}, {"pp", r.PP}, {"cfg", r.CFG}, {"cp", r.CP}, {"dp", r.DP},
		{"total_steps", r.TotalSteps}, {"num_samples", r.NumSamples},
		{"warmup_samples", r.WarmupSamples}, {"micro_batch", r.MicroBatch}}
	for _, f := range ints {
		if f.v < 0 {
			return fmt.Errorf("%w: %s = %d < 0", ErrBadReport, f.name, f.v)
		}
	}
	for i, d := range r.LatentShape {
		if d < 0 {
			return fmt.Errorf("%w: latent_shape[%d] = %d < 0", ErrBadReport, i, d)
		}
	}
	for i, s := range r.StageSteps {
		if s[0] < 0 || s[1] < s[0] || (r.TotalSteps > 0 && s[1] > r.TotalSteps) {
			return fmt.Errorf("%w: stage_steps[%d] = [%d, %d) outside [0, %d]", ErrBadReport, i, s[0], s[1], r.TotalSteps)
		}
	}
	for i, p := range r.PerRank {
		if p.Rank < 0 || (r.NProc > 0 && p.Rank >= r.NProc) {
			return fmt.Errorf("%w: per_rank[%d].rank = %d outside [0, %d)", ErrBadReport, i, p.Rank, r.NProc)
		}
	}
	floats := []struct {
		name string
		v    float64
	}{{"step_ms", r.StepMS}, {"first_sample_ms", r.FirstSampleMS}, {"steady_sample_ms", r.SteadySampleMS},
		{"throughput_samples_per_s", r.ThroughputSamplesPerS}, {"speedup", r.Speedup},
		{"efficiency", r.Efficiency}, {"wall_ms", r.WallMS}}
	for _, f := range floats {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return fmt.Errorf("%w: %s is not finite", ErrBadReport, f.name)
		}
	}
	return nil
}
