package bench

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// TraceMeta names what a trace shows.
type TraceMeta struct {
	// Title is the process row's name (for example "vdpp bench svd-dev pp=4"); "vdpp" when empty.
	Title string
	// StageSteps is the half-open step range of each rank; it names the rank rows and
	// makes ranks with no events still get a row.
	StageSteps [][2]int
}

// traceEvent is one entry of the Chrome trace event format.
type traceEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	Ts   float64        `json:"ts"`
	Dur  *float64       `json:"dur,omitempty"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	Args map[string]any `json:"args,omitempty"`
}

type traceFile struct {
	TraceEvents     []traceEvent `json:"traceEvents"`
	DisplayTimeUnit string       `json:"displayTimeUnit"`
}

// WriteTrace writes events as Chrome trace event JSON ({"traceEvents": [...],
// "displayTimeUnit": "ms"}) that opens in Perfetto and chrome://tracing. It emits metadata
// ("M") events naming process 0 after meta.Title and one thread per rank (tid = rank,
// "rank N (steps a-b)", steps shown first-last inclusive), then one complete ("X") event
// per input event, sorted by start time, with ts and dur in microseconds relative to the
// earliest event. Names read "sample 12 steps 4-7" for compute and "send s12" / "recv s12"
// for communication; args carry kind, sample(s) and the half-open step range step0/step1.
// It fails with ErrBadEvent on an invalid event.
func WriteTrace(w io.Writer, events []Event, meta TraceMeta) error {
	for i, e := range events {
		if err := e.Validate(); err != nil {
			return fmt.Errorf("bench: trace: event %d: %w", i, err)
		}
	}
	nranks := len(meta.StageSteps)
	for _, e := range events {
		nranks = max(nranks, e.Rank+1)
	}
	title := meta.Title
	if title == "" {
		title = "vdpp"
	}
	out := traceFile{DisplayTimeUnit: "ms", TraceEvents: make([]traceEvent, 0, 1+2*nranks+len(events))}
	out.TraceEvents = append(out.TraceEvents, traceEvent{Name: "process_name", Ph: "M", Args: map[string]any{"name": title}})
	for r := range nranks {
		out.TraceEvents = append(out.TraceEvents,
			traceEvent{Name: "thread_name", Ph: "M", Tid: r, Args: map[string]any{"name": rankLabel(r, meta.StageSteps, "-", " (", ")")}},
			traceEvent{Name: "thread_sort_index", Ph: "M", Tid: r, Args: map[string]any{"sort_index": r}})
	}

	sorted := slices.Clone(events)
	slices.SortStableFunc(sorted, func(a, b Event) int {
		return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(a.Rank, b.Rank), cmp.Compare(b.End, a.End))
	})
	var origin int64
	if len(sorted) > 0 {
		origin = sorted[0].Start
	}
	for _, e := range sorted {
		dur := usec(e.End - e.Start)
		args := map[string]any{"kind": e.Kind, "sample": e.Sample}
		if len(e.Samples) > 0 {
			args["samples"] = e.Samples
		}
		if e.Step1 > e.Step0 {
			args["step0"], args["step1"] = e.Step0, e.Step1
		}
		out.TraceEvents = append(out.TraceEvents, traceEvent{
			Name: eventName(e, "-"), Cat: e.Kind, Ph: "X", Ts: usec(e.Start - origin), Dur: &dur,
			Tid: e.Rank, Args: args,
		})
	}
	enc := json.NewEncoder(w)
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("bench: write trace: %w", err)
	}
	return nil
}

// usec converts nanoseconds to microseconds, rounded to the nanosecond.
func usec(ns int64) float64 { return math.Round(float64(ns)) / 1e3 }

// rankLabel names rank r with its stage: "rank 2 (steps 8-11)" with sep "-", open " (",
// close ")". Steps are shown first-last inclusive.
func rankLabel(r int, stages [][2]int, sep, open, close string) string {
	s := "rank " + strconv.Itoa(r)
	if r < len(stages) {
		if st := stepsLabel(stages[r][0], stages[r][1], sep); st != "" {
			s += open + st + close
		}
	}
	return s
}

// stepsLabel shows the half-open range [s0, s1) inclusively: "steps 4-7", "step 4", or ""
// when empty.
func stepsLabel(s0, s1 int, sep string) string {
	switch {
	case s1 <= s0:
		return ""
	case s1 == s0+1:
		return "step " + strconv.Itoa(s0)
	default:
		return "steps " + strconv.Itoa(s0) + sep + strconv.Itoa(s1-1)
	}
}

// sampleList shows the samples of e compactly: "12", "12,13", "12-19" (a run), or "" when
// the event is not about a sample.
func sampleList(e Event, sep string) string {
	ss := e.Samples
	if len(ss) == 0 {
		if e.Sample < 0 {
			return ""
		}
		return strconv.FormatInt(e.Sample, 10)
	}
	if len(ss) > 2 {
		run := true
		for i := 1; i < len(ss); i++ {
			run = run && ss[i] == ss[i-1]+1
		}
		if run {
			return strconv.FormatInt(ss[0], 10) + sep + strconv.FormatInt(ss[len(ss)-1], 10)
		}
	}
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = strconv.FormatInt(s, 10)
	}
	return strings.Join(parts, ",")
}

// eventName is the human name of an event: "sample 12 steps 4-7", "samples 12,13 step 4",
// "send s12", "decode s3", "wait".
func eventName(e Event, sep string) string {
	samples := sampleList(e, sep)
	steps := stepsLabel(e.Step0, e.Step1, sep)
	if e.Kind == KindCompute {
		var parts []string
		if samples != "" {
			word := "sample "
			if len(e.Samples) > 1 {
				word = "samples "
			}
			parts = append(parts, word+samples)
		}
		if steps != "" {
			parts = append(parts, steps)
		}
		if len(parts) == 0 {
			return e.Kind
		}
		return strings.Join(parts, " ")
	}
	if samples == "" {
		return e.Kind
	}
	return e.Kind + " s" + samples
}
