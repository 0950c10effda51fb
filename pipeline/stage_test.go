package pipeline

import (
	"errors"
	"reflect"
	"testing"
)

// drive runs a stage to completion with instant actions, delivering `incoming` items as the
// stage becomes idle, and returns the trace of actions.
func drive(t *testing.T, st *Stage, incoming []*Item) []string {
	t.Helper()
	var trace []string
	for i := 0; i < 1000; i++ {
		a := st.Next()
		switch a.Kind {
		case ActDone:
			return trace
		case ActNone:
			if len(incoming) == 0 {
				t.Fatalf("stage idle with nothing to deliver; trace %v", trace)
			}
			if err := st.Deliver(incoming[0]); err != nil {
				t.Fatal(err)
			}
			incoming = incoming[1:]
			continue
		case ActPrepare:
			trace = append(trace, "prepare")
			if err := st.Prepared(&Item{Group: a.Group, Samples: []int64{a.Group}}); err != nil {
				t.Fatal(err)
			}
		case ActCompute:
			trace = append(trace, "c"+itoa(a.Step))
			if err := st.Computed(); err != nil {
				t.Fatal(err)
			}
		case ActForward:
			trace = append(trace, "fwd")
			if err := st.Forwarded(); err != nil {
				t.Fatal(err)
			}
		case ActFinish:
			trace = append(trace, "fin")
			if err := st.Finished(); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Fatal("stage did not finish")
	return nil
}

func itoa(i int) string { return string(rune('0' + i)) }

func TestStageTraces(t *testing.T) {
	tests := []struct {
		name   string
		rng    Range
		total  int
		groups []int64
		in     []*Item
		want   []string
	}{
		{"first", Range{0, 2}, 5, []int64{0, 1}, nil,
			[]string{"prepare", "c0", "c1", "fwd", "prepare", "c0", "c1", "fwd"}},
		{"middle", Range{2, 4}, 5, []int64{0, 1}, []*Item{{Group: 0, Step: 2}, {Group: 1, Step: 2}},
			[]string{"c2", "c3", "fwd", "c2", "c3", "fwd"}},
		{"last", Range{4, 5}, 5, []int64{0, 1}, []*Item{{Group: 0, Step: 4}, {Group: 1, Step: 4}},
			[]string{"c4", "fin", "c4", "fin"}},
		{"only", Range{0, 2}, 2, []int64{0}, nil,
			[]string{"prepare", "c0", "c1", "fin"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := drive(t, NewStage(tc.rng, tc.total, tc.groups), tc.in)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("trace %v, want %v", got, tc.want)
			}
		})
	}
}

func TestStageRejects(t *testing.T) {
	mid := func() *Stage { return NewStage(Range{2, 4}, 6, []int64{0, 1}) }
	tests := []struct {
		name string
		do   func() error
	}{
		{"wrong step", func() error { return mid().Deliver(&Item{Group: 0, Step: 3}) }},
		{"group out of range", func() error { return mid().Deliver(&Item{Group: 2, Step: 2}) }},
		{"duplicate group", func() error {
			s := mid()
			_ = s.Deliver(&Item{Group: 1, Step: 2})
			return s.Deliver(&Item{Group: 1, Step: 2})
		}},
		{"first stage receives", func() error { return NewStage(Range{0, 2}, 6, []int64{0, 1}).Deliver(&Item{Step: 0}) }},
		{"computed without compute", func() error { return mid().Computed() }},
		{"finished on middle stage", func() error {
			s := mid()
			_ = s.Deliver(&Item{Group: 0, Step: 2})
			s.Next()
			_ = s.Computed()
			s.Next()
			_ = s.Computed()
			s.Next()
			return s.Finished()
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.do(); !errors.Is(err, ErrProtocol) {
				t.Fatalf("got %v, want ErrProtocol", err)
			}
		})
	}
}

func TestStageNoneWhileInFlight(t *testing.T) {
	s := NewStage(Range{0, 1}, 2, []int64{0})
	if a := s.Next(); a.Kind != ActPrepare {
		t.Fatalf("first action %v", a.Kind)
	}
	if a := s.Next(); a.Kind != ActNone {
		t.Fatalf("second action while preparing = %v, want none", a.Kind)
	}
}

// A data-parallel replica's stage handles only its own items, in order.
func TestStageReplicaShare(t *testing.T) {
	st := NewStage(Range{0, 1}, 2, []int64{1, 3})
	var made []int64
	for i := 0; i < 10; i++ {
		a := st.Next()
		if a.Kind == ActDone {
			break
		}
		switch a.Kind {
		case ActPrepare:
			made = append(made, a.Group)
			st.Prepared(&Item{Group: a.Group})
		case ActCompute:
			st.Computed()
		case ActForward:
			st.Forwarded()
		}
	}
	if !reflect.DeepEqual(made, []int64{1, 3}) {
		t.Fatalf("prepared %v, want [1 3]", made)
	}
	if err := NewStage(Range{1, 2}, 2, []int64{1, 3}).Deliver(&Item{Group: 2, Step: 1}); !errors.Is(err, ErrProtocol) {
		t.Fatalf("foreign group accepted: %v", err)
	}
}

func TestGroups(t *testing.T) {
	got := Groups(5, 2)
	want := [][]int64{{0, 1}, {2, 3}, {4}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Groups(5,2) = %v", got)
	}
}
