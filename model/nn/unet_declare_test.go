package nn

import (
	"errors"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
)

// TestDeclareSharedParam: a module read twice in one graph (the SVD transformer's shared
// time_mixer) declares its tensor once; reading it with another shape is still an error.
func TestDeclareSharedParam(t *testing.T) {
	b, err := NewBackend("go")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Declare(b, func(s Scope, g *graph.Graph) error {
		a := s.Param(g, "mixer.mix_factor", 1)
		c := s.Param(g, "mixer.mix_factor", 1)
		if a != c {
			t.Error("second Param returned a different node")
		}
		return nil
	})
	if err != nil || len(got) != 1 {
		t.Fatalf("Declare = %v, %v; want one tensor", got, err)
	}
	_, err = Declare(b, func(s Scope, g *graph.Graph) error {
		s.Param(g, "w", 2)
		s.Param(g, "w", 3)
		return nil
	})
	if !errors.Is(err, ErrShapeMismatch) {
		t.Fatalf("err = %v, want ErrShapeMismatch", err)
	}
}
