package nn

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"testing"

	"github.com/gomlx/gomlx/backends"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiomatic dot import

	"github.com/vdpp/vdpp/tensor"
)

var (
	testBackendOnce sync.Once
	testBackendVal  backends.Backend
	testBackendErr  error
)

// testBackend is the backend of the tests: GOMLX_BACKEND when set, else simplego.
func testBackend(t testing.TB) backends.Backend {
	t.Helper()
	testBackendOnce.Do(func() { testBackendVal, testBackendErr = NewBackend("") })
	if testBackendErr != nil {
		t.Fatalf("backend: %v", testBackendErr)
	}
	return testBackendVal
}

// runOp compiles fn (inputs are graph parameters with the shapes of ins) as a Program on
// the test backend and runs it once.
func runOp(t testing.TB, fn func(in []*Node) *Node, ins ...*tensor.Dense) *tensor.Dense {
	t.Helper()
	return runOpOn(t, testBackend(t), fn, ins...)
}

// runOpOn is runOp on backend b.
func runOpOn(t testing.TB, b backends.Backend, fn func(in []*Node) *Node, ins ...*tensor.Dense) *tensor.Dense {
	t.Helper()
	p, err := NewProgram(b, nil, t.Name(), func(_ Scope, in []*Node) []*Node {
		return []*Node{fn(in)}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	out, err := p.Run(ins...)
	if err != nil {
		t.Fatal(err)
	}
	return out[0]
}

func checkClose(t testing.TB, name string, got, want *tensor.Dense, tol float64) {
	t.Helper()
	if !tensor.SameShape(got, want) {
		t.Fatalf("%s: shape %v, want %v", name, got.Shape, want.Shape)
	}
	if e := tensor.RelL2(got, want); !(e <= tol) {
		t.Fatalf("%s: relative L2 error %.3g > %.3g (max abs diff %.3g)", name, e, tol, tensor.MaxAbsDiff(got, want))
	}
}

const tol = 1e-6

func TestLinear(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	tests := []struct {
		name    string
		x       []int
		in, out int
		bias    bool
	}{
		{"2d-bias", []int{5, 7}, 7, 3, true},
		{"3d-nobias", []int{2, 4, 16}, 16, 9, false},
		{"4d-bias", []int{2, 3, 2, 8}, 8, 40, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x, w, b := randDense(r, tc.x...), randDense(r, tc.out, tc.in), randDense(r, tc.out)
			var got, want *tensor.Dense
			if tc.bias {
				got = runOp(t, func(in []*Node) *Node { return Linear(in[0], in[1], in[2]) }, x, w, b)
				want = refLinear(x, w, b)
			} else {
				got = runOp(t, func(in []*Node) *Node { return Linear(in[0], in[1], nil) }, x, w)
				want = refLinear(x, w, nil)
			}
			checkClose(t, tc.name, got, want, tol)
		})
	}
}

func TestActivations(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	x := randDense(r, 3, 50)
	for i := range x.Data {
		x.Data[i] *= 4
	}
	tests := []struct {
		name string
		op   func(*Node) *Node
		ref  func(float64) float64
	}{
		{"silu", SiLU, siluRef},
		{"gelu", GELU, geluRef},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := runOp(t, func(in []*Node) *Node { return tc.op(in[0]) }, x)
			checkClose(t, tc.name, got, refMap(x, tc.ref), tol)
		})
	}
	t.Run("geglu", func(t *testing.T) {
		x, w, b := randDense(r, 2, 3, 8), randDense(r, 12, 8), randDense(r, 12)
		got := runOp(t, func(in []*Node) *Node { return GEGLU(in[0], in[1], in[2]) }, x, w, b)
		h := refLinear(x, w, b)
		want := tensor.New(2, 3, 6)
		for row := range 6 {
			for j := range 6 {
				want.Data[row*6+j] = float32(float64(h.Data[row*12+j]) * geluRef(float64(h.Data[row*12+6+j])))
			}
		}
		checkClose(t, "geglu", got, want, tol)
	})
}

func TestConv(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	tests := []struct {
		name   string
		x, w   []int
		opts   ConvOpts
		noBias bool
	}{
		{"2d-3x3-pad1", []int{2, 3, 6, 5}, []int{4, 3, 3, 3}, ConvOpts{Padding: 1}, false},
		{"2d-3x3-stride2-pad1", []int{1, 4, 7, 8}, []int{5, 4, 3, 3}, ConvOpts{Stride: 2, Padding: 1}, false},
		{"2d-vae-downsample", []int{1, 3, 8, 6}, []int{3, 3, 3, 3}, ConvOpts{Stride: 2, Pads: [][2]int{{0, 1}, {0, 1}}}, false},
		{"2d-1x1", []int{2, 6, 4, 4}, []int{3, 6, 1, 1}, ConvOpts{}, true},
		{"2d-rect-kernel", []int{1, 2, 5, 6}, []int{2, 2, 3, 2}, ConvOpts{Pads: [][2]int{{2, 0}, {1, 1}}}, false},
		{"3d-3x3x3-pad1", []int{2, 3, 4, 5, 5}, []int{4, 3, 3, 3, 3}, ConvOpts{Padding: 1}, false},
		{"3d-time", []int{2, 4, 5, 3, 3}, []int{4, 4, 3, 1, 1}, ConvOpts{Pads: [][2]int{{1, 1}, {0, 0}, {0, 0}}}, false},
	}
	for _, tc := range tests {
		x, w, b := randDense(r, tc.x...), randDense(r, tc.w...), randDense(r, tc.w[0])
		if tc.noBias {
			b = nil
		}
		pads := tc.opts.Pads
		if pads == nil {
			for range len(tc.x) - 2 {
				pads = append(pads, [2]int{tc.opts.Padding, tc.opts.Padding})
			}
		}
		want := refConv(x, w, b, max(tc.opts.Stride, 1), pads)
		for _, form := range []ConvForm{ConvAuto, ConvIm2Col, ConvNative, ConvFused} {
			t.Run(tc.name+"/"+form.String(), func(t *testing.T) {
				o := tc.opts
				o.Form = form
				conv := Conv2D
				if len(tc.x) == 5 {
					conv = Conv3D
				}
				var got *tensor.Dense
				if b == nil {
					got = runOp(t, func(in []*Node) *Node { return conv(in[0], in[1], nil, o) }, x, w)
				} else {
					got = runOp(t, func(in []*Node) *Node { return conv(in[0], in[1], in[2], o) }, x, w, b)
				}
				checkClose(t, tc.name, got, want, tol)
			})
		}
	}
}

func TestConv3DTime(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	x, w, b := randDense(r, 2, 3, 4, 2, 3), randDense(r, 5, 3, 3, 1, 1), randDense(r, 5)
	got := runOp(t, func(in []*Node) *Node { return Conv3DTime(in[0], in[1], in[2]) }, x, w, b)
	checkClose(t, "conv3dtime", got, refConv(x, w, b, 1, [][2]int{{1, 1}, {0, 0}, {0, 0}}), tol)
}

func TestConvFormFor(t *testing.T) {
	b := testBackend(t)
	want := ConvNative
	switch {
	case UsesKernels(b):
		want = ConvFused
	case IsSimpleGo(b):
		want = ConvIm2Col
	}
	if got := ConvFormFor(b); got != want {
		t.Fatalf("ConvFormFor(%s) = %v, want %v", b.Name(), got, want)
	}
}

func TestNorms(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	tests := []struct {
		name   string
		shape  []int
		groups int
		eps    float64
		offset float32
		tol    float64
	}{
		{"gn-4d", []int{2, 8, 3, 4}, 4, 1e-5, 0, tol},
		{"gn-5d-eps1e-6", []int{1, 6, 2, 3, 3}, 3, 1e-6, 0, tol},
		{"gn-3d-one-group", []int{2, 4, 5}, 1, 1e-5, 0, tol},
		// Large mean: the two-pass variance keeps the error at the fp32 rounding of the
		// mean (~1e-7·100); a one-pass E[x²]−E[x]² would be off by ~1e-2.
		{"gn-offset", []int{2, 4, 6}, 2, 1e-5, 100, 1e-5},
		// tiny variance: eps dominates, so a wrong eps placement shows.
		{"gn-eps-dominates", []int{1, 4, 8}, 2, 1e-2, 0, tol},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := randDense(r, tc.shape...)
			for i := range x.Data {
				if tc.name == "gn-eps-dominates" {
					x.Data[i] *= 1e-2
				}
				x.Data[i] += tc.offset
			}
			g, b := randDense(r, tc.shape[1]), randDense(r, tc.shape[1])
			got := runOp(t, func(in []*Node) *Node { return GroupNorm(in[0], in[1], in[2], tc.groups, tc.eps) }, x, g, b)
			checkClose(t, tc.name, got, refGroupNorm(x, g, b, tc.groups, tc.eps), tc.tol)
			// Wrong eps must be detected by the reference comparison.
			if tc.name == "gn-eps-dominates" {
				if e := tensor.RelL2(got, refGroupNorm(x, g, b, tc.groups, 1e-5)); e < 1e-3 {
					t.Fatalf("eps has no visible effect (rel L2 %g)", e)
				}
			}
			gotNA := runOp(t, func(in []*Node) *Node { return GroupNorm(in[0], nil, nil, tc.groups, tc.eps) }, x)
			checkClose(t, tc.name+"-noaffine", gotNA, refGroupNorm(x, nil, nil, tc.groups, tc.eps), tc.tol)
		})
	}
	t.Run("layernorm", func(t *testing.T) {
		x, g, b := randDense(r, 2, 3, 16), randDense(r, 16), randDense(r, 16)
		got := runOp(t, func(in []*Node) *Node { return LayerNorm(in[0], in[1], in[2], 1e-5) }, x, g, b)
		checkClose(t, "layernorm", got, refLayerNorm(x, g, b, 1e-5), tol)
	})
}

func TestAttention(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	tests := []struct {
		name          string
		b, sq, sk, dm int
		heads         int
	}{
		{"self-1head", 2, 5, 5, 8, 1},
		{"self-4heads", 2, 6, 6, 16, 4},
		{"cross", 3, 7, 1, 12, 3},
		{"cross-long", 1, 4, 9, 10, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, k, v := randDense(r, tc.b, tc.sq, tc.dm), randDense(r, tc.b, tc.sk, tc.dm), randDense(r, tc.b, tc.sk, tc.dm)
			for i := range q.Data {
				q.Data[i] *= 3 // peaky softmax
			}
			want := refAttention(q, k, v, tc.heads)
			got := runOp(t, func(in []*Node) *Node { return Attention(in[0], in[1], in[2], tc.heads) }, q, k, v)
			checkClose(t, tc.name, got, want, tol)
			for _, chunk := range []int{0, 1, 4, tc.sq} {
				got := runOp(t, func(in []*Node) *Node { return AttentionChunked(in[0], in[1], in[2], tc.heads, chunk) }, q, k, v)
				checkClose(t, fmt.Sprint(tc.name, "-chunk", chunk), got, want, tol)
			}
		})
	}
}

func TestTimesteps(t *testing.T) {
	ts := &tensor.Dense{Shape: []int{4}, Data: []float32{1.6377700567245483, -1.553652048110962, 0, 0.5}}
	tests := []struct {
		dim   int
		flip  bool
		shift float64
	}{{320, true, 0}, {256, true, 0}, {8, false, 1}, {7, true, 0}}
	for _, tc := range tests {
		got := runOp(t, func(in []*Node) *Node { return Timesteps(in[0], tc.dim, tc.flip, tc.shift) }, ts)
		want := refTimesteps(ts.Data, tc.dim, tc.flip, tc.shift)
		checkClose(t, "timesteps", got, want, tol)
	}
}

// TestTimestepsVectors checks against the SVD reference vectors in shared/svd.
func TestTimestepsVectors(t *testing.T) {
	raw, err := os.ReadFile("../../../shared/svd/vectors.json")
	if err != nil {
		t.Skipf("reference vectors not available: %v", err)
	}
	var v struct {
		Emb map[string]struct {
			T      float32         `json:"t"`
			RawEmb json.RawMessage `json:"emb"`
			IDs    []float32       `json:"ids"`
			Emb768 []float32       `json:"emb_768"`
		} `json:"timestep_embeddings_f32"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	n := 0
	for name, c := range v.Emb {
		var emb []float32
		_ = json.Unmarshal(c.RawEmb, &emb) // a nested list for the per-frame vectors: skipped
		switch {
		case len(emb) == 320:
			got := runOp(t, func(in []*Node) *Node { return Timesteps(in[0], 320, true, 0) }, &tensor.Dense{Data: []float32{c.T}})
			checkClose(t, name, got, &tensor.Dense{Shape: []int{1, 320}, Data: emb}, tol)
			n++
		case len(c.Emb768) == 768:
			ids := &tensor.Dense{Shape: []int{3}, Data: c.IDs}
			got := runOp(t, func(in []*Node) *Node { return Reshape(Timesteps(in[0], 256, true, 0), 1, 768) }, ids)
			// t = 127 makes fp32 rounding of t·f visible (|Δarg| ~ 1e-5): a looser bound.
			checkClose(t, name, got, &tensor.Dense{Shape: []int{1, 768}, Data: c.Emb768}, 1e-5)
			n++
		}
	}
	if n != 3 {
		t.Fatalf("checked %d vectors, want 3", n)
	}
}

func TestUpsampleNearest2x(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	x := randDense(r, 2, 3, 3, 4)
	got := runOp(t, func(in []*Node) *Node { return UpsampleNearest2x(in[0]) }, x)
	if !tensor.BitEqual(got, refUpsample2x(x)) {
		t.Fatal("upsample differs from the reference")
	}
}
