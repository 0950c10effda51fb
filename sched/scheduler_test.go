package sched

import (
	"reflect"
	"testing"
)

func TestStateRows(t *testing.T) {
	s := State{"a": {1, 2, 3, 4, 5, 6}, "b": {-1, -2, -3, -4, -5, -6}}
	r1 := s.Rows(3, 1, 2)
	if want := (State{"a": {3, 4}, "b": {-3, -4}}); !reflect.DeepEqual(r1, want) {
		t.Fatalf("Rows(3,1,2) = %v, want %v", r1, want)
	}
	r1["a"][0] = 99
	if s["a"][2] != 3 {
		t.Fatal("Rows shares memory with the state")
	}
	back, err := StackRows([]State{s.Rows(3, 0, 1), s.Rows(3, 1, 3)})
	if err != nil || !reflect.DeepEqual(back, s) {
		t.Fatalf("StackRows = %v, %v; want %v", back, err, s)
	}
	if st, err := StackRows([]State{nil, nil}); st != nil || err != nil {
		t.Fatalf("StackRows(nil, nil) = %v, %v", st, err)
	}
	if _, err := StackRows([]State{{"a": {1}}, {"b": {1}}}); err == nil {
		t.Fatal("states with different names were stacked")
	}
	if _, err := StackRows([]State{{"a": {1}}, nil}); err == nil {
		t.Fatal("a state and no state were stacked")
	}
	if err := s.Check(6); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(5); err == nil {
		t.Fatal("Check accepted the wrong length")
	}
	c := s.Clone()
	c["a"][0] = 42
	if s["a"][0] != 1 || State(nil).Clone() != nil {
		t.Fatal("Clone shares memory")
	}
}

// Euler keeps no state.
func TestEulerUpdate(t *testing.T) {
	e, err := New(DefaultSVDConfig(), 3)
	if err != nil {
		t.Fatal(err)
	}
	x := []float32{1, 2, 3}
	mo := []float32{0.5, -0.5, 0.25}
	want := make([]float32, 3)
	if err := e.Step(want, mo, x, 1); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 3)
	st, err := e.Update(got, mo, x, 1, State{"ignored": {0, 0, 0}})
	if err != nil || st != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("Update = %v, %v, %v; want %v, nil, nil", got, st, err, want)
	}
	if e.Sigma(1) != e.Sigmas[1] || e.Timestep(2) != e.Timesteps[2] || e.InitSigma() != e.InitNoiseSigma || e.NumSteps() != 3 {
		t.Fatal("accessors disagree with the fields")
	}
}
