// Package progress is the pure core of a run's progress display: what each rank reports
// (Rank: its stage, what it is doing, the sample-steps it has computed), a Tracker that
// turns a series of those reports into a Snapshot (steps done of the total over every
// sample in flight, the rate over a recent window, the time left), and the two renderings
// of a snapshot: a bar line redrawn in place on a terminal (Bar) and a plain line for logs
// (Plain). The driver (generate) reads the reports and writes the lines; nothing here does
// I/O or reads a clock.
//
// Contract: Observe is given reports in time order; Done never decreases; the rate is
// sample-steps per second over the last Window of observations (the whole run until a
// Window has passed), and the ETA is the steps left at that rate (unknown, negative,
// until a step has been seen).
package progress

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Phase is what a rank is doing.
type Phase string

// The phases a rank reports.
const (
	Loading   Phase = "loading"
	Denoising Phase = "denoising"
	Decoding  Phase = "decoding"
	Waiting   Phase = "waiting"
	Done      Phase = "done"
	// Stopped: the rank ended without finishing (interrupted, or failed).
	Stopped Phase = "stopped"
)

// Rank is one rank's report.
type Rank struct {
	Rank  int   `json:"rank"`
	Stage int   `json:"stage"`
	Phase Phase `json:"phase"`
	// Sample is the sample being denoised or decoded (-1: none); Step0 and Step1 the steps
	// of the call in flight or last finished ([Step0, Step1) of the run's steps).
	Sample int64 `json:"sample"`
	Step0  int   `json:"step0"`
	Step1  int   `json:"step1"`
	// Steps is the sample-steps this rank computed and counts toward the run's total (a
	// rank that computes what another rank of its group counts reports 0).
	Steps int64 `json:"steps"`
	// Decoded is the samples this rank finished decoding and writing.
	Decoded int `json:"decoded"`
}

// Snapshot is the run's progress at one moment.
type Snapshot struct {
	Done, Total        int64 // sample-steps
	Samples, OfSamples int   // samples written, of the run's
	Rate               float64
	ETA                time.Duration // < 0: unknown
	Elapsed            time.Duration
	Ranks              []Rank
}

// point is the steps done at an elapsed time.
type point struct {
	at   time.Duration
	done int64
}

// Tracker accumulates reports into snapshots.
type Tracker struct {
	Total   int64 // sample-steps of the run: samples x steps
	Samples int   // samples of the run
	// Window is how far back the rate looks (default 20 s): recent enough to follow a
	// change of pace, long enough to smooth a pipeline's fill and drain.
	Window time.Duration

	start   time.Time
	started bool
	history []point
	done    int64
}

// Observe takes the ranks' latest reports at now and returns the snapshot.
func (t *Tracker) Observe(now time.Time, ranks []Rank) Snapshot {
	if !t.started {
		t.start, t.started = now, true
	}
	elapsed := now.Sub(t.start)
	var done int64
	samples := 0
	for _, r := range ranks {
		done += r.Steps
		samples += r.Decoded
	}
	done = min(max(done, t.done), t.Total) // reports may lag; progress never goes back
	t.done = done
	window := t.Window
	if window <= 0 {
		window = 20 * time.Second
	}
	t.history = append(t.history, point{elapsed, done})
	for len(t.history) > 2 && elapsed-t.history[1].at >= window {
		t.history = t.history[1:]
	}
	s := Snapshot{Done: done, Total: t.Total, Samples: min(samples, t.Samples), OfSamples: t.Samples, ETA: -1, Elapsed: elapsed,
		Ranks: append([]Rank(nil), ranks...)}
	sort.Slice(s.Ranks, func(i, j int) bool { return s.Ranks[i].Rank < s.Ranks[j].Rank })
	// The rate runs from the window's first point with a step (the time before the first
	// step is loading) to the last point where the count moved (a rank decoding or a
	// stage waiting does not slow the steps it is not taking).
	first, last := t.history[0], t.history[0]
	for _, p := range t.history {
		if p.done == 0 {
			first = p
		}
		if p.done > last.done {
			last = p
		}
	}
	if span := last.at - first.at; span > 0 && last.done > first.done {
		s.Rate = float64(last.done-first.done) / span.Seconds()
		left := time.Duration(float64(t.Total-done) / s.Rate * float64(time.Second))
		s.ETA = max(0, left-(elapsed-last.at))
	}
	if done == t.Total {
		s.ETA = 0
	}
	return s
}

// Bar is the snapshot as one terminal line of at most width columns:
// "[=====     ] 42/100 steps  2/4 samples  3.1 steps/s  ETA 0:19 | r0 s3 step 12-13 · r1 decode s1".
func (s Snapshot) Bar(width int) string {
	const barWidth = 20
	fill := 0
	if s.Total > 0 {
		fill = int(barWidth * s.Done / s.Total)
	}
	head := fmt.Sprintf("[%s%s] %s", strings.Repeat("=", fill), strings.Repeat(" ", barWidth-fill), s.counts())
	line := head
	if len(s.Ranks) > 0 {
		line += " | " + s.ranks(true)
	}
	if width > 0 && len(line) > width {
		line = line[:max(width-1, len(head))]
	}
	return line
}

// Plain is the snapshot as a log line:
// "42/100 steps, 2/4 samples, 3.1 steps/s, ETA 0:19; rank 0: sample 3 steps 12-13, rank 1: decoding sample 1".
func (s Snapshot) Plain() string {
	line := strings.ReplaceAll(s.counts(), "  ", ", ")
	if len(s.Ranks) > 0 {
		line += "; " + s.ranks(false)
	}
	return line
}

// counts is "42/100 steps  2/4 samples  3.1 steps/s  ETA 0:19  (elapsed 0:14)".
func (s Snapshot) counts() string {
	eta := "ETA --"
	switch {
	case s.Done == s.Total && s.Samples >= s.OfSamples:
		eta = "done"
	case s.Done == s.Total:
		eta = "decoding"
	case s.ETA >= 0:
		eta = "ETA " + Clock(s.ETA)
	}
	rate := "-- steps/s"
	if s.Rate > 0 {
		rate = fmt.Sprintf("%.3g steps/s", s.Rate)
		if s.Rate < 1 {
			rate = fmt.Sprintf("%.3g s/step", 1/s.Rate)
		}
	}
	return fmt.Sprintf("%d/%d steps  %d/%d samples  %s  %s  elapsed %s", s.Done, s.Total, s.Samples, s.OfSamples, rate, eta, Clock(s.Elapsed))
}

// ranks says what each rank is on.
func (s Snapshot) ranks(short bool) string {
	parts := make([]string, 0, len(s.Ranks))
	for _, r := range s.Ranks {
		parts = append(parts, r.describe(short))
	}
	if short {
		return strings.Join(parts, " · ")
	}
	return strings.Join(parts, ", ")
}

func (r Rank) describe(short bool) string {
	var what string
	switch r.Phase {
	case Denoising:
		if short {
			what = fmt.Sprintf("s%d step %d-%d", r.Sample, r.Step0, r.Step1)
		} else {
			what = fmt.Sprintf("sample %d steps %d-%d", r.Sample, r.Step0, r.Step1)
		}
	case Decoding:
		if short {
			what = fmt.Sprintf("decode s%d", r.Sample)
		} else {
			what = fmt.Sprintf("decoding sample %d", r.Sample)
		}
	case "":
		what = string(Waiting)
	default:
		what = string(r.Phase)
	}
	if short {
		return fmt.Sprintf("r%d %s", r.Rank, what)
	}
	return fmt.Sprintf("rank %d: %s", r.Rank, what)
}

// Clock formats d as m:ss, or h:mm:ss from an hour.
func Clock(d time.Duration) string {
	sec := int64(d.Round(time.Second) / time.Second)
	if sec >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", sec/3600, sec/60%60, sec%60)
	}
	return fmt.Sprintf("%d:%02d", sec/60, sec%60)
}
