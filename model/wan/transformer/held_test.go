package transformer

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/internal/goldentest"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/tensor"
	"github.com/vdpp/vdpp/tensor/quant"
)

// heldConfig is a small Wan transformer whose weight rows fit every block type (widths of
// 256): 2 heads of 128, ffn 512, text and frequency embeddings of 256.
var heldConfig = Config{PatchSize: [3]int{1, 2, 2}, NumAttentionHeads: 2, AttentionHeadDim: 128, InChannels: 16,
	OutChannels: 16, TextDim: 256, FreqDim: 256, FFNDim: 512, NumLayers: 2, CrossAttnNorm: true,
	QKNorm: "rms_norm_across_heads", Eps: 1e-6, RopeMaxSeqLen: 64}

// initWeights returns weights as a trained network's are scaled: matrices N(0, 1/fan_in),
// norms 1, biases and tables small.
func initWeights(cfg Config, seed uint64) (map[string]*tensor.Dense, error) {
	exp, err := ExpectedTensors(cfg)
	if err != nil {
		return nil, err
	}
	r := rand.New(rand.NewPCG(seed, 7))
	w := map[string]*tensor.Dense{}
	names := make([]string, 0, len(exp))
	for name := range exp {
		names = append(names, name)
	}
	slices.Sort(names) // the same weights in every run
	for _, name := range names {
		shape := exp[name]
		d := tensor.New(shape...)
		std := 0.02
		switch {
		case strings.Contains(name, "norm") && len(shape) == 1:
			std = 0
			for i := range d.Data {
				d.Data[i] = 1
			}
		case strings.HasSuffix(name, ".weight") && len(shape) >= 2:
			std = 1 / math.Sqrt(float64(tensor.NumElements(shape[1:])))
		}
		if std > 0 {
			for i := range d.Data {
				d.Data[i] = float32(r.NormFloat64() * std)
			}
		}
		w[name] = d
	}
	return w, nil
}

// TestHeldAccuracy runs one transformer call with its weights held in bf16, f16, Q8_0,
// Q4_K and the Q4_K_M mix (converted at load as --weights-dtype converts them:
// Hold(nn.HoldFor(dtype)), the output head kept as stored) against the same call with the float32 weights they were converted
// from, and against the float32 call on the weights the type makes of them (quantized,
// widened):
//
//   - bf16, f16 and Q8_0 within 1e-2 relative L2 of the float32 weights' call, Q4_K within
//     5e-2 (its weights alone are 7% from float32 weights of this scale: with the head in
//     q4_K too the call is 8.5e-2 from float32, the type's own error, which no kernel
//     removes), and Q4_K_M within 4e-2, which plain Q4_K (4.4e-2) misses: its value and
//     feed-forward output projections in q6_K measure 3.6e-2;
//   - the call on its own widened weights: bit for bit for bf16 and f16 (the half kernels
//     widen as they load), within 1e-4 for Q8_0 (its products are the float products of
//     its weights) and 1e-2 for Q4_K (8-bit activations).
func TestHeldAccuracy(t *testing.T) {
	cfg := heldConfig
	w, err := initWeights(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	b := goldentest.Backend(t)
	if !nn.UsesKernels(b) {
		t.Skip("weights are held compact only where vdpp's CPU kernels run")
	}
	r := rand.New(rand.NewPCG(2, 3))
	hidden := randDense(r, 2, 16, 2, 8, 8)
	ts := &tensor.Dense{Shape: []int{2}, Data: []float32{700, 700}}
	ehs := randDense(r, 2, 12, 256)
	forward := func(t *testing.T, w map[string]*tensor.Dense, hold nn.HoldFunc) (*tensor.Dense, *nn.Weights) {
		t.Helper()
		m, err := NewHeld(cfg, w, b, hold)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		out, err := m.Forward(hidden, ts, ehs, nil)
		if err != nil {
			t.Fatal(err)
		}
		return out, m.Weights()
	}
	want, _ := forward(t, w, nil)
	for _, tc := range []struct {
		dtype         string // --weights-dtype
		typ           quant.Type
		tol, tolWiden float64
	}{{"bf16", quant.BF16, 1e-2, 0}, {"f16", quant.F16, 1e-2, 0}, {"q8_0", quant.Q8_0, 1e-2, 1e-4}, {"q4_k", quant.Q4_K, 5e-2, 1e-2}, {"q4_k_m", quant.Q6_K, 4e-2, 1e-2}} {
		t.Run(tc.dtype, func(t *testing.T) {
			hf, err := nn.HoldFor(tc.dtype)
			if err != nil {
				t.Fatal(err)
			}
			hold := Hold(hf)
			got, held := forward(t, w, hold)
			if held.HeldBytes()[tc.typ] == 0 {
				t.Fatalf("no weight held as %v", tc.typ)
			}
			widened, err := nn.Widened(w, hold)
			if err != nil {
				t.Fatal(err)
			}
			ref, _ := forward(t, widened, nil)
			rel, relWiden := relL2(got.Data, want.Data), relL2(got.Data, ref.Data)
			t.Logf("%s: relative L2 %.3g against float32 weights, %.3g against the widened %s weights; held %s",
				tc.dtype, rel, relWiden, tc.dtype, heldSummary(held))
			if tc.tol > 0 && rel > tc.tol {
				t.Errorf("%s: relative L2 %.3g > %g against float32 weights", tc.dtype, rel, tc.tol)
			}
			if relWiden > tc.tolWiden {
				t.Errorf("%s: relative L2 %.3g > %g against the call on its widened weights", tc.dtype, relWiden, tc.tolWiden)
			}
		})
	}
}

func heldSummary(w *nn.Weights) string {
	var parts []string
	for t, n := range w.HeldBytes() {
		parts = append(parts, fmt.Sprintf("%v %d", t, n))
	}
	return strings.Join(parts, ", ")
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

// TestHeldWithoutKernelsBF16 is the whole transformer call on a backend without vdpp's CPU
// kernels (`--backend go:kernels=off`, which builds the same generic graph XLA compiles)
// with --weights-dtype bf16: the weight matrices are held as GoMLX BFloat16 tensors (half
// of float32's bytes; the output head, kept as stored, and the norms, biases and tables in
// float32), and the call equals, bit for bit, the float32 call on the bf16-rounded weights
// (the graph converts each to float32 where it is used), within 1e-2 relative L2 of the
// call on the float32 weights.
func TestHeldWithoutKernelsBF16(t *testing.T) {
	cfg := heldConfig
	w, err := initWeights(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := nn.NewBackend("go:kernels=off")
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(2, 3))
	hidden := randDense(r, 1, 16, 2, 8, 8)
	ts := &tensor.Dense{Shape: []int{1}, Data: []float32{700}}
	ehs := randDense(r, 1, 12, 256)
	hold := Hold(nn.HoldAs(quant.BF16))
	forward := func(w map[string]*tensor.Dense, hold nn.HoldFunc) (*tensor.Dense, map[quant.Type]int64) {
		m, err := NewHeld(cfg, w, b, hold)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		out, err := m.Forward(hidden, ts, ehs, nil)
		if err != nil {
			t.Fatal(err)
		}
		return out, m.HeldBytes()
	}
	got, held := forward(w, hold)
	// The bytes as the hold func asks them: 2 a weight for the matrices it holds in bf16.
	want := map[quant.Type]int64{}
	var total int64
	for name, d := range w {
		n := int64(tensor.NumElements(d.Shape))
		total += 4 * n
		if hold(name, d.Shape, quant.F32) != quant.BF16 {
			want[quant.F32] += 4 * n
			continue
		}
		want[quant.BF16] += 2 * n
	}
	rounded, err := nn.Widened(w, hold)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(held, want) {
		t.Errorf("held %v, want %v", held, want)
	}
	f32, _ := forward(w, nil)
	ref, _ := forward(rounded, nil)
	rel, relRounded := relL2(got.Data, f32.Data), relL2(got.Data, ref.Data)
	t.Logf("held %v (%.3f of float32's %d bytes); relative L2 %.3g against float32 weights, %.3g against the bf16-rounded weights",
		held, float64(held[quant.BF16]+held[quant.F32])/float64(total), total, rel, relRounded)
	if rel > 1e-2 {
		t.Errorf("relative L2 %.3g > 1e-2 against the float32 weights' call", rel)
	}
	if relRounded != 0 {
		t.Errorf("relative L2 %.3g against the float32 call on the bf16-rounded weights, want bit for bit", relRounded)
	}
}
