package nn

import (
	"encoding/binary"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"

	"github.com/vdpp/vdpp/tensor"
	"github.com/vdpp/vdpp/tensor/quant"
)

// storedF32 returns d as a stored float32 tensor.
func storedF32(d *tensor.Dense) StoredTensor {
	b := make([]byte, 4*len(d.Data))
	for i, v := range d.Data {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return StoredTensor{Shape: d.Shape, Type: quant.F32, Data: b}
}

// storedAs returns d converted to type t (what a file storing t would hold).
func storedAs(t *testing.T, d *tensor.Dense, typ quant.Type) StoredTensor {
	t.Helper()
	b, err := quant.Quantize(typ, d.Data)
	if err != nil {
		t.Fatal(err)
	}
	return StoredTensor{Shape: d.Shape, Type: typ, Data: b}
}

// widened returns what type t makes of d: d quantized to t and back.
func widened(t *testing.T, d *tensor.Dense, typ quant.Type) *tensor.Dense {
	t.Helper()
	s := storedAs(t, d, typ)
	out := tensor.New(d.Shape...)
	if err := quant.Dequantize(typ, s.Data, out.Data); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestHeldLinear runs a linear layer (and GEGLU) on weights held in each compact type
// against the same layer on the float32 widening of those weights: the half types give
// the same bits, as does q5_0 (no kernel of its own: the product widens a group of rows at
// a time), q8_0 and q4_K agree within their activation quantization (relative L2 below 1%).
// A held weight used by another op (here an add) is widened for it, and only for it.
func TestHeldLinear(t *testing.T) {
	b := testBackend(t)
	if !UsesKernels(b) {
		t.Skip("no fused CPU kernels on this backend")
	}
	r := rand.New(rand.NewPCG(1, 2))
	const rows, in, out = 37, 256, 96
	x := randDense(r, 2, rows, in)
	w, bias := randDense(r, out, in), randDense(r, out)
	for i := range w.Data {
		w.Data[i] *= 0.05
	}
	for _, typ := range []quant.Type{quant.F16, quant.BF16, quant.Q8_0, quant.Q4_K, quant.Q5_0} {
		t.Run(typ.String(), func(t *testing.T) {
			held, err := NewWeightsHeld(b, HoldAs(typ), func(add func(string, StoredTensor) error) error {
				if err := add("l.weight", storedF32(w)); err != nil {
					return err
				}
				return add("l.bias", storedF32(bias))
			})
			if err != nil {
				t.Fatal(err)
			}
			if ht, _ := held.Held("l.weight"); ht != typ {
				t.Fatalf("weight held as %v, want %v", ht, typ)
			}
			if ht, _ := held.Held("l.bias"); ht != quant.F32 {
				t.Fatalf("bias held as %v, want f32", ht)
			}
			wide, err := NewWeights(b, map[string]*tensor.Dense{"l.weight": widened(t, w, typ), "l.bias": bias})
			if err != nil {
				t.Fatal(err)
			}
			build := func(s Scope, in []*graph.Node) []*graph.Node {
				g := in[0].Graph()
				wn, bn := s.Param(g, "l.weight", out, in[0].Shape().Dim(-1)), s.Param(g, "l.bias", out)
				return []*graph.Node{LinearAct(in[0], wn, bn, ActGELUTanh), GEGLU(in[0], wn, bn), graph.AddScalar(wn, 1)}
			}
			before := widenRuns.Load()
			got := runProgram(t, held, build, x)
			if n := widenRuns.Load() - before; n != 1 {
				t.Errorf("the held weight was widened %d times, want once (for the add only)", n)
			}
			want := runProgram(t, wide, build, x)
			for i := range got {
				rel := relL2(got[i].Data, want[i].Data)
				// Only the integer kernels (q8_0, q4_K) quantize the activations; the
				// other types are multiplied as their float32 widening.
				exact := typ != quant.Q8_0 && typ != quant.Q4_K || i == 2
				if exact && rel != 0 || rel > 1e-2 {
					t.Errorf("output %d: relative L2 %.3g against float32 weights (exact: %v)", i, rel, exact)
				}
			}
			n, _ := typ.Bytes(out*in, in)
			if typ == quant.Q5_0 && held.HeldBytes()[typ] != n {
				t.Errorf("%d bytes held as %v, want %d", held.HeldBytes()[typ], typ, n)
			}
			if held.HeldBytes()[quant.F32] != 4*out || held.Bytes() < n+4*out || held.Bytes() > n+4*out+int64(2*32*in) {
				t.Errorf("held bytes %v, total %d, for %d of %v plus a float32 bias", held.HeldBytes(), held.Bytes(), n, typ)
			}
		})
	}
}

// widenRuns counts the widening ops run (a test's check that linear layers read their
// weights as held).
var widenRuns atomic.Int64

func init() { widenHook = func() { widenRuns.Add(1) } }

func runProgram(t *testing.T, w *Weights, build BuildFunc, in ...*tensor.Dense) []*tensor.Dense {
	t.Helper()
	p, err := NewProgram(w.Backend(), w, t.Name(), build)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	out, err := p.Run(in...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func relL2(got, want []float32) float64 {
	var num, den float64
	for i := range got {
		d := float64(got[i]) - float64(want[i])
		num += d * d
		den += float64(want[i]) * float64(want[i])
	}
	return math.Sqrt(num / den)
}

// TestHeldPolicies checks which type each HoldFunc holds a tensor in.
func TestHeldPolicies(t *testing.T) {
	for _, tc := range []struct {
		name  string
		shape []int
		hold  HoldFunc
		want  quant.Type
	}{
		{"a.weight", []int{64, 256}, HoldAs(quant.Q4_K), quant.Q4_K},
		{"a.weight", []int{64, 96}, HoldAs(quant.Q4_K), quant.Q5_0}, // rows of 96: q4_K's fallback
		{"a.weight", []int{64, 48}, HoldAs(quant.Q4_K), quant.F32},  // no block fits: as stored
		{"a.bias", []int{64}, HoldAs(quant.Q8_0), quant.F32},
		{"norm.weight", []int{64}, HoldAs(quant.Q8_0), quant.F32},
		{"table", []int{6, 64}, HoldAs(quant.Q8_0), quant.F32},
		{"conv.weight", []int{8, 4, 3, 3}, HoldAs(quant.Q8_0), quant.F32},
		{"a.weight", []int{64, 256}, HoldAsStored, quant.BF16},
		{"condition_embedder.time_proj.weight", []int{64, 256}, HoldAs(quant.Q8_0), quant.BF16},
		{"patch_embedding.weight", []int{64, 4, 1, 2, 2}, HoldAs(quant.Q8_0), quant.BF16},
		// --weights-dtype q4_k_m: the mix's type by name and rows, convolutions f16,
		// embeddings as stored.
		{"blocks.0.attn1.to_v.weight", []int{256, 256}, q4km(t), quant.Q6_K},
		{"blocks.0.ffn.net.2.weight", []int{256, 512}, q4km(t), quant.Q6_K},
		{"blocks.0.attn1.to_q.weight", []int{256, 256}, q4km(t), quant.Q4_K},
		{"blocks.0.attn1.to_q.weight", []int{256, 320}, q4km(t), quant.F16},
		{"conv.weight", []int{256, 256, 3, 3}, q4km(t), quant.F16},
		{"norm.weight", []int{256}, q4km(t), quant.F32},
		{"time_embedding.linear_1.weight", []int{256, 256}, q4km(t), quant.BF16},
	} {
		stored := quant.F32
		if tc.want == quant.BF16 {
			stored = quant.BF16
		}
		if got := tc.hold(tc.name, tc.shape, stored); got != tc.want {
			t.Errorf("%s %v: held as %v, want %v", tc.name, tc.shape, got, tc.want)
		}
	}
}

// q4km is --weights-dtype q4_k_m's HoldFunc.
func q4km(t *testing.T) HoldFunc {
	h, err := HoldFor("q4_k_m")
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestHeldConv runs a convolution and a linear layer on a reshaped convolution kernel (as
// Wan's patch embedding does) with the kernel held in f16 and bf16: the bits of the same
// network on the float32 widening, and the kernel never widened as a whole.
func TestHeldConv(t *testing.T) {
	b := testBackend(t)
	if !UsesKernels(b) {
		t.Skip("no fused CPU kernels on this backend")
	}
	r := rand.New(rand.NewPCG(3, 4))
	x := randDense(r, 2, 4, 9, 10)
	w, bias := randDense(r, 6, 4, 3, 3), randDense(r, 6)
	patches := randDense(r, 2, 11, 36)
	for _, typ := range []quant.Type{quant.F16, quant.BF16} {
		held, err := NewWeightsHeld(b, HoldAs(typ), func(add func(string, StoredTensor) error) error {
			if err := add("c.weight", storedF32(w)); err != nil {
				return err
			}
			return add("c.bias", storedF32(bias))
		})
		if err != nil {
			t.Fatal(err)
		}
		wide, err := NewWeights(b, map[string]*tensor.Dense{"c.weight": widened(t, w, typ), "c.bias": bias})
		if err != nil {
			t.Fatal(err)
		}
		build := func(s Scope, in []*graph.Node) []*graph.Node {
			g := in[0].Graph()
			wn, bn := s.Param(g, "c.weight", 6, 4, 3, 3), s.Param(g, "c.bias", 6)
			return []*graph.Node{
				Conv2D(in[0], wn, bn, ConvOpts{Padding: 1}),
				Conv2D(in[0], wn, bn, ConvOpts{Stride: 2}),
				Linear(in[1], graph.Reshape(wn, 6, 36), bn),
			}
		}
		before := widenRuns.Load()
		got := runProgram(t, held, build, x, patches)
		if n := widenRuns.Load() - before; n != 0 {
			t.Errorf("%v: the held kernel was widened %d times", typ, n)
		}
		want := runProgram(t, wide, build, x, patches)
		for i := range got {
			if rel := relL2(got[i].Data, want[i].Data); rel != 0 {
				t.Errorf("%v output %d: relative L2 %.3g against float32 weights", typ, i, rel)
			}
		}
	}
}

// TestRunState runs a program with a recurrent state (a running sum over chunks, kept on
// the backend) and checks the outputs, that a state passed to a run is consumed, and that
// a closed state is refused.
func TestRunState(t *testing.T) {
	b := testBackend(t)
	p, err := NewProgram(b, nil, t.Name(), func(_ Scope, in []*graph.Node) []*graph.Node {
		sum := in[0]
		if len(in) > 1 {
			sum = graph.Add(in[0], in[1])
		}
		return []*graph.Node{graph.MulScalar(sum, 2), sum}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var states []*State
	total := []float32{0, 0, 0}
	for chunk := range 3 {
		x := &tensor.Dense{Shape: []int{3}, Data: []float32{1, float32(chunk), -2}}
		for i, v := range x.Data {
			total[i] += v
		}
		prev := states
		out, next, err := p.RunState(1, []*tensor.Dense{x}, states)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range prev {
			if s.t != nil {
				t.Fatalf("chunk %d: a state passed to the run was not consumed", chunk)
			}
		}
		if len(out) != 1 || len(next) != 1 || !slices.Equal(next[0].Shape(), []int{3}) {
			t.Fatalf("chunk %d: %d outputs and %d states", chunk, len(out), len(next))
		}
		for i, v := range out[0].Data {
			if v != 2*total[i] {
				t.Fatalf("chunk %d: output %v, want twice %v", chunk, out[0].Data, total)
			}
		}
		states = next
	}
	states[0].Close()
	if _, _, err := p.RunState(1, []*tensor.Dense{tensor.New(3)}, states); err == nil {
		t.Fatal("RunState took a closed state")
	}
}

// TestHeldWithoutKernels is the load path of a backend without vdpp's fused CPU kernels (XLA
// on a CPU or GPU, or the pure-Go backend with kernels=off, which this test runs through
// the same generic graph code XLA compiles; no PJRT plugin is needed). A matrix held in
// bf16 (a bf16 file as stored, or any file with --weights-dtype bf16) is a GoMLX BFloat16
// tensor, half the bytes of float32, converted to float32 in the graph where it is used;
// f16 is held so only where the backend has GoMLX's Float16 (XLA: simplego in GoMLX v0.26
// has no Float16, so it holds f16 in float32); every other type (q8_0, q4_K: no GoMLX
// dtype) is widened once at load to float32, its stored values (a block type asked by
// --weights-dtype is not applied). Either way the network computes on exactly those
// values: a linear layer and a convolution give the same outputs, bit for bit, as the
// float32 weights the held values stand for, with no widening op in the program, and the
// bytes are counted in the type held.
func TestHeldWithoutKernels(t *testing.T) {
	b, err := NewBackend("go:kernels=off")
	if err != nil {
		t.Fatal(err)
	}
	if UsesKernels(b) {
		t.Fatal("go:kernels=off runs the fused kernels")
	}
	if h := HoldingOf(b); h != (Holding{BF16: true}) {
		t.Fatalf("go:kernels=off holds %+v, want bf16 only", h)
	}
	r := rand.New(rand.NewPCG(5, 6))
	const rows, in, out, cin, cout = 5, 256, 32, 4, 8
	x, img := randDense(r, rows, in), randDense(r, 1, cin, 6, 6)
	w, bias, cw := randDense(r, out, in), randDense(r, out), randDense(r, cout, cin, 3, 3)
	// as returns what the weights of a file storing stored, held in held, stand for: the
	// stored values, rounded to held when it is not float32.
	as := func(d *tensor.Dense, stored, held quant.Type) *tensor.Dense {
		v := d
		if stored != quant.F32 {
			v = widened(t, d, stored)
		}
		if held != quant.F32 {
			v = widened(t, v, held)
		}
		return v
	}
	for _, tc := range []struct {
		name   string
		stored quant.Type
		hold   HoldFunc
		held   quant.Type
	}{
		{"q8_0 file", quant.Q8_0, HoldAsStored, quant.F32},
		{"q4_K file", quant.Q4_K, HoldAsStored, quant.F32},
		{"bf16 file", quant.BF16, HoldAsStored, quant.BF16},
		{"f16 file", quant.F16, HoldAsStored, quant.F32},
		{"f16 file as q8_0", quant.F16, HoldAs(quant.Q8_0), quant.F32},
		{"f32 file as q4_K", quant.F32, HoldAs(quant.Q4_K), quant.F32},
		{"f32 file as bf16", quant.F32, HoldAs(quant.BF16), quant.BF16},
		{"q8_0 file as bf16", quant.Q8_0, HoldAs(quant.BF16), quant.BF16},
		{"f32 file as f16", quant.F32, HoldAs(quant.F16), quant.F32},
	} {
		t.Run(tc.name, func(t *testing.T) {
			held, err := NewWeightsHeld(b, tc.hold, func(add func(string, StoredTensor) error) error {
				if err := add("l.weight", storedAs(t, w, tc.stored)); err != nil {
					return err
				}
				// A convolution's rows of 3 fit no block: a block type keeps it as stored.
				cs := tc.stored
				if cs.Quantized() {
					cs = quant.F32
				}
				if err := add("c.weight", storedAs(t, cw, cs)); err != nil {
					return err
				}
				return add("l.bias", storedF32(bias))
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"l.weight", "c.weight"} {
				if ht, _ := held.Held(name); ht != tc.held {
					t.Errorf("%s held as %v on a backend without kernels, want %v", name, ht, tc.held)
				}
				v := held.ctx.GetVariableByScopeAndName(held.ctx.Scope(), name)
				if want := map[quant.Type]dtypes.DType{quant.F32: dtypes.Float32, quant.BF16: dtypes.BFloat16}[tc.held]; v.Shape().DType != want {
					t.Errorf("%s is a %s tensor on the backend, want %s", name, v.Shape().DType, want)
				}
			}
			size := map[quant.Type]int64{quant.F32: 4, quant.BF16: 2}[tc.held]
			wantBytes := map[quant.Type]int64{tc.held: size * (out*in + cout*cin*9)}
			wantBytes[quant.F32] += 4 * out
			if got := held.HeldBytes(); !maps.Equal(got, wantBytes) {
				t.Errorf("bytes by type %v, want %v", got, wantBytes)
			}
			if got, want := held.Bytes(), wantBytes[quant.F32]+wantBytes[quant.BF16]; got != want {
				t.Errorf("Bytes() %d, want %d", got, want)
			}
			cs := tc.stored
			if cs.Quantized() {
				cs = quant.F32
			}
			// The held bytes are counted as a planner counts them.
			hb, err := HeldTypes(HoldingOf(b), held.Shapes(), func(name string) quant.Type {
				return map[string]quant.Type{"l.weight": tc.stored, "c.weight": cs}[name] // f32 (0) else
			}, tc.hold)
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(hb, wantBytes) {
				t.Errorf("HeldTypes %v, want %v", hb, wantBytes)
			}
			wide, err := NewWeights(b, map[string]*tensor.Dense{"l.weight": as(w, tc.stored, tc.held),
				"c.weight": as(cw, cs, tc.held), "l.bias": bias})
			if err != nil {
				t.Fatal(err)
			}
			build := func(s Scope, in []*graph.Node) []*graph.Node {
				g := in[0].Graph()
				wn, bn := s.Param(g, "l.weight", out, in[0].Shape().Dim(-1)), s.Param(g, "l.bias", out)
				cn := s.Param(g, "c.weight", cout, cin, 3, 3)
				return []*graph.Node{Linear(in[0], wn, bn), graph.AddScalar(wn, 0), Conv2D(in[1], cn, nil, ConvOpts{Padding: 1})}
			}
			before := widenRuns.Load()
			got := runProgram(t, held, build, x, img)
			if n := widenRuns.Load() - before; n != 0 {
				t.Errorf("%d widening ops ran: the weight was not held as a GoMLX dtype", n)
			}
			want := runProgram(t, wide, build, x, img)
			for i := range got {
				if rel := relL2(got[i].Data, want[i].Data); rel != 0 {
					t.Errorf("output %d: relative L2 %.3g against the float32 weights the held ones stand for, want bit for bit", i, rel)
				}
			}
			if tc.stored != quant.F32 && relL2(got[1].Data, w.Data) == 0 {
				t.Errorf("the weight equals the float32 original: the stored %v bytes were not used", tc.stored)
			}
			if tc.held == quant.BF16 && tc.stored != quant.BF16 && relL2(got[1].Data, as(w, tc.stored, quant.F32).Data) == 0 {
				t.Errorf("the weight equals its stored values: it was not rounded to bf16")
			}
		})
	}
}

// unsharedBackend is a backend that shares no buffers with Go, as XLA on a GPU: weights
// reach it through BufferFromFlatData.
type unsharedBackend struct{ backends.Backend }

func (unsharedBackend) HasSharedBuffers() bool { return false }

// TestHeldHalfUnshared is the upload a GPU takes: on a backend without shared buffers a
// weight held in bf16 is converted into one host copy of GoMLX's BFloat16 and uploaded from
// it, and the graph reads the bf16-rounded values.
func TestHeldHalfUnshared(t *testing.T) {
	inner, err := NewBackend("go:kernels=off")
	if err != nil {
		t.Fatal(err)
	}
	b := unsharedBackend{inner}
	r := rand.New(rand.NewPCG(5, 6))
	w, x := randDense(r, 8, 64), randDense(r, 3, 64)
	held, err := NewWeightsHeld(b, HoldAs(quant.BF16), func(add func(string, StoredTensor) error) error {
		return add("l.weight", storedF32(w))
	})
	if err != nil {
		t.Fatal(err)
	}
	if ht, _ := held.Held("l.weight"); ht != quant.BF16 || held.Bytes() != 2*8*64 {
		t.Fatalf("held as %v in %d bytes, want bf16 in %d", ht, held.Bytes(), 2*8*64)
	}
	build := func(s Scope, in []*graph.Node) []*graph.Node {
		return []*graph.Node{graph.AddScalar(s.Param(in[0].Graph(), "l.weight", 8, 64), 0)}
	}
	if rel := relL2(runProgram(t, held, build, x)[0].Data, widened(t, w, quant.BF16).Data); rel != 0 {
		t.Errorf("relative L2 %.3g against the bf16-rounded weight, want bit for bit", rel)
	}
}
