package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

type parsedTrace struct {
	TraceEvents []struct {
		Name string         `json:"name"`
		Cat  string         `json:"cat"`
		Ph   string         `json:"ph"`
		Ts   float64        `json:"ts"`
		Dur  *float64       `json:"dur"`
		Pid  *int           `json:"pid"`
		Tid  *int           `json:"tid"`
		Args map[string]any `json:"args"`
	} `json:"traceEvents"`
	DisplayTimeUnit string `json:"displayTimeUnit"`
}

func TestWriteTrace(t *testing.T) {
	const t0 = int64(1_700_000_000_000_000_000)
	events, stages, _ := simPipeline(t0, 3, 12, 4, 2*ms, ms/2, 3*ms)
	events = append(events, Event{Rank: 0, Kind: KindCompute, Sample: -1, Samples: []int64{8, 9}, Step0: 0, Step1: 1,
		Start: t0 + 500*ms, End: t0 + 510*ms + 123})
	// Rank 3 has a stage but no events; it must still get a row.
	stages = append(stages, [2]int{12, 12})
	var buf bytes.Buffer
	if err := WriteTrace(&buf, events, TraceMeta{Title: "vdpp bench test", StageSteps: stages}); err != nil {
		t.Fatal(err)
	}
	var tr parsedTrace
	if err := json.Unmarshal(buf.Bytes(), &tr); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	if tr.DisplayTimeUnit != "ms" {
		t.Errorf("displayTimeUnit = %q", tr.DisplayTimeUnit)
	}
	threads := map[int]string{}
	var process string
	var xs int
	lastTs := -1.0
	seenX := false
	names := map[string]bool{}
	for i, e := range tr.TraceEvents {
		if e.Pid == nil || *e.Pid != 0 {
			t.Fatalf("event %d: pid = %v, want 0", i, e.Pid)
		}
		switch e.Ph {
		case "M":
			if seenX {
				t.Errorf("metadata event %d after complete events", i)
			}
			switch e.Name {
			case "process_name":
				process, _ = e.Args["name"].(string)
			case "thread_name":
				threads[*e.Tid], _ = e.Args["name"].(string)
			case "thread_sort_index":
				if int(e.Args["sort_index"].(float64)) != *e.Tid {
					t.Errorf("thread %d sort_index %v", *e.Tid, e.Args["sort_index"])
				}
			default:
				t.Errorf("unexpected metadata %q", e.Name)
			}
		case "X":
			seenX = true
			xs++
			if e.Ts < lastTs {
				t.Errorf("event %d ts %v before previous %v: not sorted", i, e.Ts, lastTs)
			}
			lastTs = e.Ts
			if e.Dur == nil || *e.Dur < 0 {
				t.Errorf("event %d: dur = %v", i, e.Dur)
			}
			if e.Tid == nil || *e.Tid < 0 || *e.Tid > 3 {
				t.Errorf("event %d: tid = %v", i, e.Tid)
			}
			if e.Cat == "" || e.Args["kind"] != e.Cat {
				t.Errorf("event %d: cat %q args %v", i, e.Cat, e.Args)
			}
			names[e.Name] = true
		default:
			t.Errorf("event %d: phase %q", i, e.Ph)
		}
	}
	if process != "vdpp bench test" {
		t.Errorf("process name %q", process)
	}
	wantThreads := map[int]string{0: "rank 0 (steps 0-3)", 1: "rank 1 (steps 4-7)", 2: "rank 2 (steps 8-11)", 3: "rank 3"}
	for r, want := range wantThreads {
		if threads[r] != want {
			t.Errorf("thread %d = %q, want %q", r, threads[r], want)
		}
	}
	if xs != len(events) {
		t.Errorf("%d complete events, want %d", xs, len(events))
	}
	for _, want := range []string{"sample 0 steps 0-3", "sample 3 steps 8-11", "send s1", "recv s2", "decode s3", "wait s0",
		"samples 8,9 step 0"} {
		if !names[want] {
			t.Errorf("no event named %q; have %v", want, names)
		}
	}
	// Timestamps are microseconds from the earliest event; the micro-batch lasts 10.000123 ms.
	first := tr.TraceEvents[len(tr.TraceEvents)-xs]
	if first.Ts != 0 {
		t.Errorf("first ts = %v, want 0", first.Ts)
	}
	for _, e := range tr.TraceEvents {
		if e.Name == "samples 8,9 step 0" {
			if e.Ts != 500_000 || *e.Dur != 10_000.123 {
				t.Errorf("micro-batch ts %v dur %v, want 500000 and 10000.123", e.Ts, *e.Dur)
			}
			if s, _ := e.Args["samples"].([]any); len(s) != 2 || e.Args["step0"] != 0.0 || e.Args["step1"] != 1.0 {
				t.Errorf("micro-batch args %v", e.Args)
			}
		}
	}
}

func TestWriteTraceEmptyAndInvalid(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteTrace(&buf, nil, TraceMeta{}); err != nil {
		t.Fatal(err)
	}
	var tr parsedTrace
	if err := json.Unmarshal(buf.Bytes(), &tr); err != nil || len(tr.TraceEvents) != 1 || tr.TraceEvents[0].Args["name"] != "vdpp" {
		t.Errorf("empty trace: %v %+v", err, tr)
	}
	err := WriteTrace(&bytes.Buffer{}, []Event{{Rank: 0, Kind: KindCompute, Start: 10, End: 5}}, TraceMeta{})
	if !errors.Is(err, ErrBadEvent) {
		t.Errorf("reversed event: err = %v, want ErrBadEvent", err)
	}
}

func TestEventName(t *testing.T) {
	tests := []struct {
		e    Event
		want string
	}{
		{Event{Kind: KindCompute, Sample: 12, Step0: 4, Step1: 8}, "sample 12 steps 4-7"},
		{Event{Kind: KindCompute, Sample: 3, Step0: 4, Step1: 5}, "sample 3 step 4"},
		{Event{Kind: KindCompute, Sample: -1, Samples: []int64{4, 5, 6, 7}, Step0: 0, Step1: 2}, "samples 4-7 steps 0-1"},
		{Event{Kind: KindCompute, Sample: -1, Samples: []int64{4, 9, 6}}, "samples 4,9,6"},
		{Event{Kind: KindCompute, Sample: -1}, "compute"},
		{Event{Kind: KindSend, Sample: 12, Step0: 8, Step1: 8}, "send s12"},
		{Event{Kind: KindRecv, Sample: 0}, "recv s0"},
		{Event{Kind: KindWait, Sample: -1}, "wait"},
	}
	for _, tc := range tests {
		if got := eventName(tc.e, "-"); got != tc.want {
			t.Errorf("eventName(%+v) = %q, want %q", tc.e, got, tc.want)
		}
	}
}
