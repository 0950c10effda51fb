package nn

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import

	"github.com/vdpp/vdpp/tensor"
)

// tinyNet is a two-layer MLP in the style of a network package: it reads its weights
// through the Scope with declared shapes.
func tinyNet(s Scope, x *Node, in, hidden, out int) *Node {
	g := x.Graph()
	l1, l2 := s.In("layers.0"), s.In("layers.1")
	h := SiLU(Linear(x, l1.Param(g, "weight", hidden, in), l1.Param(g, "bias", hidden)))
	return Linear(h, l2.Param(g, "weight", out, hidden), l2.Param(g, "bias", out))
}

func tinyWeights(r *rand.Rand, prefix string, in, hidden, out int) map[string]*tensor.Dense {
	return map[string]*tensor.Dense{
		prefix + "layers.0.weight": randDense(r, hidden, in),
		prefix + "layers.0.bias":   randDense(r, hidden),
		prefix + "layers.1.weight": randDense(r, out, hidden),
		prefix + "layers.1.bias":   randDense(r, out),
	}
}

func TestProgramWithWeights(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	ts := tinyWeights(r, "net.", 6, 10, 3)
	w, err := NewWeights(testBackend(t), ts)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := w.Bytes(), int64(4*(60+10+30+3)); got != want {
		t.Fatalf("Bytes = %d, want %d", got, want)
	}
	p, err := NewProgram(testBackend(t), w, "tiny", func(s Scope, in []*Node) []*Node {
		return []*Node{tinyNet(s.In("net"), in[0], 6, 10, 3)}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ref := func(x *tensor.Dense) *tensor.Dense {
		h := refMap(refLinear(x, ts["net.layers.0.weight"], ts["net.layers.0.bias"]), siluRef)
		return refLinear(h, ts["net.layers.1.weight"], ts["net.layers.1.bias"])
	}
	// Two shapes (two compiled graphs), each run twice, also concurrently.
	xs := []*tensor.Dense{randDense(r, 4, 6), randDense(r, 2, 5, 6)}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	outs := make([]*tensor.Dense, 8)
	for i := range 8 {
		wg.Go(func() {
			o, err := p.Run(xs[i%2])
			if err == nil {
				outs[i] = o[0]
			}
			errs[i] = err
		})
	}
	wg.Wait()
	// A second program on the same weights (e.g. another network part) sees them too.
	p2, err := NewProgram(testBackend(t), w, "tiny-first-layer", func(s Scope, in []*Node) []*Node {
		l := s.In("net.layers.0")
		return []*Node{Linear(in[0], l.Param(in[0].Graph(), "weight", 10, 6), l.Param(in[0].Graph(), "bias", 10))}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	o2, err := p2.Run(xs[0])
	if err != nil {
		t.Fatal(err)
	}
	checkClose(t, "second program", o2[0], refLinear(xs[0], ts["net.layers.0.weight"], ts["net.layers.0.bias"]), tol)
	for i := range 8 {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		checkClose(t, fmt.Sprint("run ", i), outs[i], ref(xs[i%2]), tol)
		if !tensor.BitEqual(outs[i], outs[i%2]) {
			t.Fatalf("run %d differs bitwise from run %d", i, i%2)
		}
	}
}

func TestProgramErrors(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	ts := tinyWeights(r, "", 6, 10, 3)
	ts["layers.1.bias"] = randDense(r, 4) // wrong shape
	w, err := NewWeights(testBackend(t), ts)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		scope string
		want  error
	}{
		{"shape", "", ErrShapeMismatch},
		{"missing", "other", ErrMissingTensor},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewProgram(testBackend(t), w, tc.name, func(s Scope, in []*Node) []*Node {
				if tc.scope != "" {
					s = s.In(tc.scope)
				}
				return []*Node{tinyNet(s, in[0], 6, 10, 3)}
			})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			_, err = p.Run(randDense(r, 2, 6))
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	p, err := NewProgram(testBackend(t), nil, "noinputs", func(_ Scope, in []*Node) []*Node { return in })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Run(); !errors.Is(err, ErrNoInputs) {
		t.Fatalf("Run() err = %v, want ErrNoInputs", err)
	}
	if _, err := NewWeights(testBackend(t), map[string]*tensor.Dense{"a/b": tensor.New(1)}); err == nil {
		t.Fatal("NewWeights accepted a name with '/'")
	}
}

func TestDeclareAndCheck(t *testing.T) {
	b := testBackend(t)
	decl, err := Declare(b, func(s Scope, g *Graph) error {
		x := Parameter(g, "x", F32(1, 6))
		tinyNet(s.In("net"), x, 6, 10, 3)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]int{
		"net.layers.0.weight": {10, 6}, "net.layers.0.bias": {10},
		"net.layers.1.weight": {3, 10}, "net.layers.1.bias": {3},
	}
	if err := CheckTensors(want, decl); err != nil {
		t.Fatalf("declared %v: %v", decl, err)
	}
	tests := []struct {
		name string
		got  map[string][]int
		want []error
	}{
		{"equal", want, nil},
		{"missing", map[string][]int{"net.layers.0.weight": {10, 6}, "net.layers.0.bias": {10}, "net.layers.1.weight": {3, 10}}, []error{ErrMissingTensor}},
		{"unexpected+shape", map[string][]int{"net.layers.0.weight": {10, 6}, "net.layers.0.bias": {10}, "net.layers.1.weight": {3, 11}, "net.layers.1.bias": {3}, "extra": {1}}, []error{ErrUnexpectedTensor, ErrShapeMismatch}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckTensors(decl, tc.got)
			if tc.want == nil && err != nil {
				t.Fatal(err)
			}
			if tc.want != nil && err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !errors.Is(err, w) {
					t.Fatalf("err = %v, want %v", err, w)
				}
			}
			for _, other := range []error{ErrMissingTensor, ErrUnexpectedTensor, ErrShapeMismatch} {
				found := false
				for _, w := range tc.want {
					found = found || w == other
				}
				if !found && errors.Is(err, other) {
					t.Fatalf("err = %v unexpectedly matches %v", err, other)
				}
			}
		})
	}
	// Conflicting declarations of one name are an error.
	_, err = Declare(b, func(s Scope, g *Graph) error {
		s.Param(g, "w", 2)
		s.Param(g, "w", 3)
		return nil
	})
	if !errors.Is(err, ErrShapeMismatch) {
		t.Fatalf("conflicting declaration: err = %v", err)
	}
}

func TestCheckWeights(t *testing.T) {
	want := map[string][]int{"w": {2}}
	w := tensor.New(2)
	use, err := CheckWeights(want, map[string]*tensor.Dense{"w": w, "buf": tensor.New(1)}, "buf")
	if err != nil || len(use) != 1 || use["w"] != w {
		t.Fatalf("ignored buffer: %v, %v", use, err)
	}
	all := map[string]*tensor.Dense{"w": w}
	if use, err := CheckWeights(want, all); err != nil || len(use) != 1 {
		t.Fatalf("exact weights: %v, %v", use, err)
	}
	if _, err := CheckWeights(want, map[string]*tensor.Dense{"w": nil}); err == nil || err.Error() != `tensor "w" is nil` {
		t.Fatalf("nil tensor: %v", err)
	}
	if _, err := CheckWeights(want, map[string]*tensor.Dense{"w": w, "buf": w}); !errors.Is(err, ErrUnexpectedTensor) {
		t.Fatalf("extra tensor: %v", err)
	}
	if _, err := CheckWeights(want, map[string]*tensor.Dense{"w": tensor.New(3)}); !errors.Is(err, ErrShapeMismatch) {
		t.Fatalf("wrong shape: %v", err)
	}
}
