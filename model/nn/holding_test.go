package nn

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/vdpp/vdpp/model/nn/backendspec"
	"github.com/vdpp/vdpp/tensor"
	"github.com/vdpp/vdpp/tensor/quant"
)

// TestHolding is the table of what each backend holds weights in: every type with vdpp's
// kernels; bf16 and f16 as GoMLX dtypes on XLA; bf16 only on simplego without the kernels
// (GoMLX v0.26's simplego has no Float16); float32 for everything else. A spec naming XLA
// that does not resolve on this host is still XLA's holding (plans made for a GPU host).
func TestHolding(t *testing.T) {
	kernels, xla, goOff := Holding{Kernels: true}, Holding{BF16: true, F16: true}, Holding{BF16: true}
	for _, tc := range []struct {
		spec string
		want Holding
	}{
		{"go:kernels=on", kernels},
		{"go:kernels=off", goOff},
		{"go:kernels=gemm+ops", goOff}, // no fused ops: nothing reads a compact layout
		{"xla:cuda", xla},
		{"xla:/no/such/xla_cuda_plugin.so", xla},
	} {
		got, err := HoldingForSpec(tc.spec)
		if err != nil {
			t.Fatalf("%s: %v", tc.spec, err)
		}
		if got != tc.want {
			t.Errorf("%s holds %+v, want %+v", tc.spec, got, tc.want)
		}
	}
	if _, err := HoldingForSpec("tpu"); err == nil {
		t.Error("an unknown backend resolved")
	}
	if got := HoldingFor(backendspec.Resolution{Kind: backendspec.KindXLA}); got != xla {
		t.Errorf("XLA holds %+v", got)
	}
	shape := []int{3, 64}
	for _, tc := range []struct {
		h        Holding
		asked    quant.Type
		want     quant.Type
		wantSize int64
	}{
		{kernels, quant.Q8_0, quant.Q8_0, -1},
		{xla, quant.BF16, quant.BF16, 2 * 3 * 64},
		{xla, quant.F16, quant.F16, 2 * 3 * 64},
		{xla, quant.Q8_0, quant.F32, 4 * 3 * 64},
		{xla, quant.Q4_K, quant.F32, 4 * 3 * 64},
		{goOff, quant.BF16, quant.BF16, 2 * 3 * 64},
		{goOff, quant.F16, quant.F32, 4 * 3 * 64},
		{goOff, quant.F32, quant.F32, 4 * 3 * 64},
	} {
		got := tc.h.Type(tc.asked)
		if got != tc.want {
			t.Errorf("%+v holds %v as %v, want %v", tc.h, tc.asked, got, tc.want)
		}
		size, err := tc.h.Size(shape, got)
		if err != nil {
			t.Fatal(err)
		}
		if tc.wantSize < 0 {
			tc.wantSize, _ = HeldSize(shape, got)
		}
		if size != tc.wantSize {
			t.Errorf("%+v: %v %v is %d bytes, want %d", tc.h, shape, got, size, tc.wantSize)
		}
	}
}

// TestQ8_0AsBF16 is what a q8_0 file held in bf16 (--weights-dtype bf16 on a backend without
// vdpp's kernels, instead of float32) costs in accuracy: on N(0, 1) weights bf16's rounding
// of the q8_0 values is a third of q8_0's own error and adds under a tenth to it (1024 x
// 1024: 5.35e-3 relative L2 from the float32 weights for q8_0, 5.61e-3 for q8_0 then bf16).
func TestQ8_0AsBF16(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	w := randDense(r, 1024, 1024)
	q := widened(t, w, quant.Q8_0)
	qb := widened(t, q, quant.BF16)
	errQ, errQB, step := relL2(q.Data, w.Data), relL2(qb.Data, w.Data), relL2(qb.Data, q.Data)
	t.Logf("relative L2 from the float32 weights: q8_0 %.3g, q8_0 then bf16 %.3g (bf16's rounding of the q8_0 values %.3g)", errQ, errQB, step)
	if errQB > 1.1*errQ || step > errQ/2 {
		t.Errorf("q8_0 then bf16 is %.3g from the float32 weights (q8_0 %.3g, the bf16 rounding %.3g): more than a tenth added", errQB, errQ, step)
	}
}

// TestWidened: a tensor the hold func keeps as stored is passed through; one it holds in a
// block type comes back as that type's round trip (near, not equal, to the original).
func TestWidened(t *testing.T) {
	w := map[string]*tensor.Dense{"a.weight": tensor.New(64, 256), "a.bias": tensor.New(64)}
	for i := range w["a.weight"].Data {
		w["a.weight"].Data[i] = float32(i%97)/97 - 0.5
	}
	got, err := Widened(w, HoldAs(quant.Q8_0))
	if err != nil {
		t.Fatal(err)
	}
	if got["a.bias"] != w["a.bias"] {
		t.Errorf("a.bias was copied, want it passed through")
	}
	raw, err := quant.Quantize(quant.Q8_0, w["a.weight"].Data)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]float32, len(w["a.weight"].Data))
	if err := quant.Dequantize(quant.Q8_0, raw, want); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got["a.weight"].Data, want) || slices.Equal(got["a.weight"].Data, w["a.weight"].Data) {
		t.Errorf("a.weight is not q8_0's round trip of the original")
	}
}
