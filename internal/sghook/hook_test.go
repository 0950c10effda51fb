package sghook

import (
	"slices"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// TestInstall fails when vdpp's hooks no longer fit the GoMLX in go.mod: the sign that an
// upgrade changed simplego's internals (see the package documentation).
func TestInstall(t *testing.T) {
	if err := Install(); err != nil {
		t.Fatal(err)
	}
}

func newBackend(t *testing.T, parts Parts) backends.Backend {
	t.Helper()
	b, err := simplego.New("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Finalize)
	if err := Enable(b, parts); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestEnablePerBackend: what a backend runs is its own record, and a backend never named
// runs none of it.
func TestEnablePerBackend(t *testing.T) {
	a, b := newBackend(t, All), newBackend(t, Ops)
	raw, err := simplego.New("")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Finalize()
	if Enabled(a) != All || Enabled(b) != Ops || Enabled(raw) != 0 {
		t.Fatalf("Enabled: %b, %b, %b; want %b, %b, 0", Enabled(a), Enabled(b), Enabled(raw), All, Ops)
	}
	if err := Enable(b, GEMM); err != nil || Enabled(b) != GEMM {
		t.Fatalf("Enable again: %v, Enabled %b", err, Enabled(b))
	}
}

// TestEmitOnlyInInference: Emit adds a fused op only to a graph that Inference is building
// on a backend that runs Fused; any other graph is refused.
func TestEmitOnlyInInference(t *testing.T) {
	emit := func(b backends.Backend, inference bool) (ok bool) {
		g := graph.NewGraph(b, t.Name())
		defer g.Finalize()
		defer func() {
			if r := recover(); r != nil {
				ok = false
			}
		}()
		build := func() {
			x := graph.Parameter(g, "x", shapes.Make(dtypes.Float32, 2))
			Emit(g, x.Shape(), axpy{}, x, x)
		}
		if inference {
			Inference(g, build)
		} else {
			build()
		}
		return true
	}
	fused, unfused := newBackend(t, All), newBackend(t, GEMM|Ops)
	for _, tc := range []struct {
		name      string
		b         backends.Backend
		inference bool
		want      bool
	}{
		{"inference graph", fused, true, true},
		{"training graph", fused, false, false},
		{"backend without Fused", unfused, true, false},
	} {
		if got := emit(tc.b, tc.inference); got != tc.want {
			t.Errorf("%s: Emit succeeded = %v, want %v", tc.name, got, tc.want)
		}
	}
	g := graph.NewGraph(fused, "after")
	defer g.Finalize()
	Inference(g, func() {})
	if IsInference(g) {
		t.Error("a graph stays marked after Inference returned")
	}
}

// scaleBytes is a BytesKernel: out[i] = x[i]·b[i] for float32 x and uint8 b.
type scaleBytes struct{}

func (scaleBytes) Name() string                       { return "scale by bytes" }
func (scaleBytes) Run(out []float32, ins [][]float32) { panic("scaleBytes: Run without bytes") }
func (scaleBytes) RunBytes(out []float32, ins [][]float32, raw [][]byte) {
	for i := range out {
		out[i] = ins[0][i] * float32(raw[1][i])
	}
}

// TestBytesKernel runs a fused op with a uint8 input and finds its kernel and inputs back
// with FusedOf.
func TestBytesKernel(t *testing.T) {
	b := newBackend(t, All)
	g := graph.NewGraph(b, "bytes")
	var x, w, f *graph.Node
	Inference(g, func() {
		x = graph.Parameter(g, "x", shapes.Make(dtypes.Float32, 3))
		w = graph.Parameter(g, "w", shapes.Make(dtypes.Uint8, 3))
		f = Emit(g, x.Shape(), scaleBytes{}, x, w)
	})
	if k, ins, ok := FusedOf(f); !ok || k.Name() != "scale by bytes" || len(ins) != 2 || ins[1] != w {
		t.Fatalf("FusedOf(fused node) = %v, %v, %v", k, ins, ok)
	}
	if _, _, ok := FusedOf(x); ok {
		t.Fatal("FusedOf(parameter) reported a fused op")
	}
	g.Compile(graph.AddScalar(f, 1))
	got := g.Run([]float32{1, 2, 3}, []uint8{2, 3, 200})[0].Value().([]float32)
	if want := []float32{3, 7, 601}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	g2 := graph.NewGraph(b, "bytes2")
	Inference(g2, func() {
		defer func() {
			if recover() == nil {
				t.Error("Emit of a float32 kernel took a uint8 input")
			}
		}()
		x := graph.Parameter(g2, "x", shapes.Make(dtypes.Float32, 3))
		w := graph.Parameter(g2, "w", shapes.Make(dtypes.Uint8, 3))
		Emit(g2, x.Shape(), axpy{}, x, w)
	})
}

// TestEmitBytesOnlyOutsideInference: outside an inference graph a fused op of bytes alone
// (nothing to differentiate) is accepted, one with a float32 input is not.
func TestEmitBytesOnlyOutsideInference(t *testing.T) {
	b := newBackend(t, All)
	g := graph.NewGraph(b, t.Name())
	defer g.Finalize()
	w := graph.Parameter(g, "w", shapes.Make(dtypes.Uint8, 3))
	widened := Emit(g, shapes.Make(dtypes.Float32, 3), scaleBytes{}, w) // no float32 input
	if _, _, ok := FusedOf(widened); !ok {
		t.Fatal("the op of bytes was not emitted")
	}
	defer func() {
		if recover() == nil {
			t.Error("Emit took a float32 input outside an inference graph")
		}
	}()
	x := graph.Parameter(g, "x", shapes.Make(dtypes.Float32, 3))
	Emit(g, x.Shape(), scaleBytes{}, x, w)
}
