package bench

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// ErrTooFewSamples: a statistic needs more measured samples than the run produced.
var ErrTooFewSamples = errors.New("bench: too few measured samples")

// ErrBadWindow: a time window or duration is empty or negative.
var ErrBadWindow = errors.New("bench: empty or negative time window")

// Timing is the sample-completion summary of one run.
type Timing struct {
	FirstSampleMS         float64 // run start to the earliest completion
	SteadySampleMS        float64 // median interval between consecutive measured completions
	ThroughputSamplesPerS float64 // (n_measured-1) / (t_last - t_first_measured)
	Measured              int     // samples after warm-up
}

const nsPerMS = 1e6

// FirstSampleMS returns the time from start to the earliest completion, in milliseconds.
// completions are Unix nanoseconds in any order. It fails with ErrTooFewSamples when there
// are none and with ErrBadWindow when a completion precedes start.
func FirstSampleMS(start int64, completions []int64) (float64, error) {
	if len(completions) == 0 {
		return 0, fmt.Errorf("%w: first-sample latency needs 1 completion, have 0", ErrTooFewSamples)
	}
	first := slices.Min(completions)
	if first < start {
		return 0, fmt.Errorf("%w: first completion %d ns before run start", ErrBadWindow, start-first)
	}
	return float64(first-start) / nsPerMS, nil
}

// measured sorts a copy of completions and returns the samples after warm-up: the
// completions with index >= warmup in ascending time order. At least two are needed.
func measured(completions []int64, warmup int) ([]int64, error) {
	if warmup < 0 {
		return nil, fmt.Errorf("%w: warm-up %d < 0", ErrTooFewSamples, warmup)
	}
	if len(completions)-warmup < 2 {
		return nil, fmt.Errorf("%w: need at least 2 completions after %d warm-up, have %d in all",
			ErrTooFewSamples, warmup, len(completions))
	}
	s := slices.Clone(completions)
	slices.Sort(s)
	return s[warmup:], nil
}

// SteadyIntervalMS returns the steady-state time per sample, in milliseconds, defined
// exactly as follows: sort the completion times (Unix ns, any order given); drop the first
// warmup of them (the warm-up samples, by completion order); take the intervals between
// consecutive remaining completions (n_measured-1 intervals; the interval from the last
// warm-up completion to the first measured one is not included); return their median (the
// mean of the two middle values when their count is even). It fails with ErrTooFewSamples
// when fewer than 2 completions remain after warm-up or warmup is negative.
func SteadyIntervalMS(completions []int64, warmup int) (float64, error) {
	m, err := measured(completions, warmup)
	if err != nil {
		return 0, fmt.Errorf("steady interval: %w", err)
	}
	iv := make([]int64, len(m)-1)
	for i := range iv {
		iv[i] = m[i+1] - m[i]
	}
	slices.Sort(iv)
	n := len(iv)
	var med float64
	if n%2 == 1 {
		med = float64(iv[n/2])
	} else {
		med = (float64(iv[n/2-1]) + float64(iv[n/2])) / 2
	}
	return med / nsPerMS, nil
}

// ThroughputPerS returns samples per second over the measured window: with the measured
// completions chosen as in SteadyIntervalMS, (n_measured-1) / (t_last - t_first_measured).
// It fails with ErrTooFewSamples when fewer than 2 completions remain after warm-up and with
// ErrBadWindow when they all completed at the same instant.
func ThroughputPerS(completions []int64, warmup int) (float64, error) {
	m, err := measured(completions, warmup)
	if err != nil {
		return 0, fmt.Errorf("throughput: %w", err)
	}
	span := m[len(m)-1] - m[0]
	if span <= 0 {
		return 0, fmt.Errorf("throughput: %w: %d measured completions at the same instant", ErrBadWindow, len(m))
	}
	return float64(len(m)-1) / (float64(span) / 1e9), nil
}

// ComputeTiming computes first-sample latency (from start), the steady interval and the
// throughput of one run; see FirstSampleMS, SteadyIntervalMS and ThroughputPerS.
func ComputeTiming(start int64, completions []int64, warmup int) (Timing, error) {
	first, err := FirstSampleMS(start, completions)
	if err != nil {
		return Timing{}, fmt.Errorf("first sample: %w", err)
	}
	steady, err := SteadyIntervalMS(completions, warmup)
	if err != nil {
		return Timing{}, err
	}
	tput, err := ThroughputPerS(completions, warmup)
	if err != nil {
		return Timing{}, err
	}
	return Timing{FirstSampleMS: first, SteadySampleMS: steady, ThroughputSamplesPerS: tput,
		Measured: len(completions) - warmup}, nil
}

// kindClass maps an event kind to the RankStats bucket that counts it.
type kindClass int

const (
	classNone kindClass = iota
	classCompute
	classComm
	classWait
)

func classOf(kind string) kindClass {
	switch kind {
	case KindCompute, KindDecode, KindEncode:
		return classCompute
	case KindSend, KindRecv:
		return classComm
	case KindWait:
		return classWait
	}
	return classNone
}

// RankAccounting sums each rank's time in the window [windowStart, windowEnd) (Unix ns):
//   - ComputeMS: union of "compute", "encode" and "decode" events (all model work);
//   - CommMS: union of "send" and "recv" events;
//   - WaitMS: union of "wait" events (blocked waiting for input);
//   - BusyFraction: ComputeMS / window length.
//
// Every interval is clipped to the window first, and overlapping intervals of one bucket
// on one rank are counted once (their union), so the result never exceeds the window.
// It returns one entry per rank 0..nranks-1 in order. Events of other kinds, invalid events
// (see Event.Validate) and events of ranks outside [0, nranks) are ignored. When the window
// is empty or negative every duration is 0.
func RankAccounting(events []Event, nranks int, windowStart, windowEnd int64) []RankStats {
	if nranks < 0 {
		nranks = 0
	}
	out := make([]RankStats, nranks)
	for r := range out {
		out[r].Rank = r
	}
	if windowEnd <= windowStart {
		return out
	}
	type key struct {
		rank  int
		class kindClass
	}
	buckets := map[key][][2]int64{}
	for _, e := range events {
		c := classOf(e.Kind)
		if c == classNone || e.Validate() != nil || e.Rank >= nranks {
			continue
		}
		s, t := max(e.Start, windowStart), min(e.End, windowEnd)
		if t <= s {
			continue
		}
		k := key{e.Rank, c}
		buckets[k] = append(buckets[k], [2]int64{s, t})
	}
	window := float64(windowEnd - windowStart)
	for k, iv := range buckets {
		ms := float64(unionLength(iv)) / nsPerMS
		st := &out[k.rank]
		switch k.class {
		case classCompute:
			st.ComputeMS = ms
			st.BusyFraction = ms * nsPerMS / window
		case classComm:
			st.CommMS = ms
		case classWait:
			st.WaitMS = ms
		}
	}
	return out
}

// unionLength returns the total length covered by the half-open intervals (sorted in place).
func unionLength(iv [][2]int64) int64 {
	slices.SortFunc(iv, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	var total int64
	curS, curE := iv[0][0], iv[0][1]
	for _, x := range iv[1:] {
		if x[0] > curE {
			total += curE - curS
			curS, curE = x[0], x[1]
			continue
		}
		curE = max(curE, x[1])
	}
	return total + curE - curS
}

// EventWindow returns the earliest start and latest end of the valid events, and false
// when there are none.
func EventWindow(events []Event) (start, end int64, ok bool) {
	for _, e := range events {
		if e.Validate() != nil {
			continue
		}
		if !ok {
			start, end, ok = e.Start, e.End, true
			continue
		}
		start, end = min(start, e.Start), max(end, e.End)
	}
	return start, end, ok
}

// SteadyPerSampleMS is the steady time per sample of a mesh whose replicas complete items
// (micro-batches of `micro` consecutive samples) independently: within each replica, the
// gaps between consecutive completed items after warm-up, each divided by the item's sample
// count; their median over all replicas, divided by the number of replicas. With one replica
// and micro-batch 1 it is exactly SteadyIntervalMS; unlike the median interval of merged
// completions it does not collapse when replicas or micro-batches finish together.
func SteadyPerSampleMS(replicas []map[int64]int64, micro, warmup int) (float64, error) {
	if micro < 1 {
		micro = 1
	}
	var gaps []float64
	for _, comp := range replicas {
		items := map[int64]int64{} // item -> completion time (latest of its samples)
		sizes := map[int64]int{}
		for s, t := range comp {
			if s < int64(warmup) {
				continue
			}
			g := s / int64(micro)
			items[g] = max(items[g], t)
			sizes[g]++
		}
		ids := make([]int64, 0, len(items))
		for g := range items {
			ids = append(ids, g)
		}
		slices.Sort(ids)
		for i := 1; i < len(ids); i++ {
			gaps = append(gaps, float64(items[ids[i]]-items[ids[i-1]])/float64(sizes[ids[i]]))
		}
	}
	if len(gaps) == 0 {
		return 0, fmt.Errorf("steady per sample: %w: no two measured items complete in one replica", ErrTooFewSamples)
	}
	slices.Sort(gaps)
	n := len(gaps)
	med := gaps[n/2]
	if n%2 == 0 {
		med = (gaps[n/2-1] + gaps[n/2]) / 2
	}
	return med / nsPerMS / float64(len(replicas)), nil
}
