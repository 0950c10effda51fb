package nn

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/tensor"
)

func TestNewWeightsStream(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	ts := tinyWeights(r, "", 4, 5, 2)
	w, err := NewWeightsStream(testBackend(t), func(add func(string, *tensor.Dense) error) error {
		for n, d := range ts {
			if err := add(n, d); err != nil {
				return err
			}
			d.Data = nil // the caller may drop the data at once
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Shapes()) != 4 || w.Bytes() != 4*(20+5+10+2) {
		t.Errorf("shapes %v, %d bytes", w.Shapes(), w.Bytes())
	}

	boom := errors.New("boom")
	for _, c := range []struct {
		name string
		load func(add func(string, *tensor.Dense) error) error
		want string
	}{
		{"duplicate", func(add func(string, *tensor.Dense) error) error {
			_ = add("a", tensor.New(2))
			return add("a", tensor.New(2))
		}, `"a" added twice`},
		{"bad name", func(add func(string, *tensor.Dense) error) error { return add("a/b", tensor.New(1)) }, "invalid tensor name"},
		{"nil", func(add func(string, *tensor.Dense) error) error { return add("a", nil) }, "does not match its shape"},
		{"loader error", func(func(string, *tensor.Dense) error) error { return boom }, "boom"},
	} {
		if _, err := NewWeightsStream(testBackend(t), c.load); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
}
