package sghook

import (
	"slices"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// TestInstall fails when vdpp's hooks no longer fit the GoMLX in go.mod: the sign that an
// upgrade changed simplego's internals (see the package documentation).
func TestInstall(t *testing.T) {
	if err := Install(All); err != nil {
		t.Fatal(err)
	}
	if got := Installed(); got != All {
		t.Fatalf("Installed() = %b, want %b", got, All)
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
	if err := Install(All); err != nil {
		t.Fatal(err)
	}
	b, err := backends.NewWithConfig("go")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Finalize()
	g := graph.NewGraph(b, "bytes")
	x := graph.Parameter(g, "x", shapes.Make(dtypes.Float32, 3))
	w := graph.Parameter(g, "w", shapes.Make(dtypes.Uint8, 3))
	f := Emit(g, x.Shape(), scaleBytes{}, x, w)
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
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Emit of a float32 kernel took a uint8 input")
			}
		}()
		Emit(g, x.Shape(), axpy{}, x, w)
	}()
}
