package sched

import (
	"math"
	"reflect"
	"testing"
)

func TestStateRows(t *testing.T) {
	nan := float32(math.NaN())
	s := State{Latent: map[string][]float32{"a": {1, 2, 3, 4, 5, 6}, "b": {-1, -2, -3, -4, -5, -6}}, Shared: map[string][]float32{"n": {2, nan}}}
	r1 := s.Rows(3, 1, 2)
	if want := map[string][]float32{"a": {3, 4}, "b": {-3, -4}}; !reflect.DeepEqual(r1.Latent, want) || len(r1.Shared["n"]) != 2 {
		t.Fatalf("Rows(3,1,2) = %v, want latent %v", r1, want)
	}
	r1.Latent["a"][0] = 99
	r1.Shared["n"][0] = 99
	if s.Latent["a"][2] != 3 || s.Shared["n"][0] != 2 {
		t.Fatal("Rows shares memory with the state")
	}
	back, err := StackRows([]State{s.Rows(3, 0, 1), s.Rows(3, 1, 3)})
	if err != nil || !reflect.DeepEqual(back.Latent, s.Latent) || !sameBits(back.Shared["n"], s.Shared["n"]) {
		t.Fatalf("StackRows = %v, %v; want %v", back, err, s)
	}
	if st, err := StackRows([]State{{}, {}}); !st.Empty() || err != nil {
		t.Fatalf("StackRows of empty states = %v, %v", st, err)
	}
	if _, err := StackRows([]State{{Latent: map[string][]float32{"a": {1}}}, {Latent: map[string][]float32{"b": {1}}}}); err == nil {
		t.Fatal("states with different names were stacked")
	}
	if _, err := StackRows([]State{{Latent: map[string][]float32{"a": {1}}}, {}}); err == nil {
		t.Fatal("a state and no state were stacked")
	}
	if _, err := StackRows([]State{{Shared: map[string][]float32{"n": {1}}}, {Shared: map[string][]float32{"n": {2}}}}); err == nil {
		t.Fatal("states at different steps were stacked")
	}
	if err := s.Check(6); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(5); err == nil {
		t.Fatal("Check accepted the wrong length")
	}
	c := s.Clone()
	c.Latent["a"][0] = 42
	if s.Latent["a"][0] != 1 || !(State{}).Clone().Empty() {
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
	st, err := e.Update(got, mo, x, 1, State{Latent: map[string][]float32{"ignored": {0, 0, 0}}})
	if err != nil || !st.Empty() || !reflect.DeepEqual(got, want) {
		t.Fatalf("Update = %v, %v, %v; want %v, empty, nil", got, st, err, want)
	}
	if e.Sigma(1) != e.Sigmas[1] || e.Timestep(2) != e.Timesteps[2] || e.InitSigma() != e.InitNoiseSigma || e.NumSteps() != 3 {
		t.Fatal("accessors disagree with the fields")
	}
}
