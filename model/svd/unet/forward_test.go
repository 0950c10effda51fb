package unet

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/vdpp/vdpp/tensor"
	"github.com/vdpp/vdpp/tensor/quant"
)

// TestFP16Variant: the fp16 weights load held as stored (their matrices in f16, what the
// kernels read) and give an output close to, but not identical with, the fp32 reference.
func TestFP16Variant(t *testing.T) {
	ck := devCheckpoint(t)
	in := readCase(t, ck, "unet_forward", "inputs")
	ref := readCase(t, ck, "unet_forward", "outputs")["sample_out"]
	m := devModel(t, "fp16")
	if h := m.HeldBytes(); h[quant.F16] == 0 || m.WeightBytes() >= devModel(t, "").WeightBytes() {
		t.Fatalf("fp16 model holds %d bytes (%v), fp32 %d: the matrices stay f16", m.WeightBytes(), h, devModel(t, "").WeightBytes())
	}
	got, err := m.Forward(in["sample"], in["timestep"], in["encoder_hidden_states"], in["added_time_ids"])
	if err != nil {
		t.Fatal(err)
	}
	rel := tensor.RelL2(got, ref)
	t.Logf("fp16 weights vs fp32 reference: rel L2 %.3g", rel)
	if rel == 0 || rel > 1e-2 {
		t.Fatalf("rel L2 %.3g, want in (0, 1e-2]", rel)
	}
}

// TestTimestepBroadcast: a [1] timestep and a scalar give bit-identical results to the
// same value repeated per row, per-row timesteps really condition each row, and repeated
// calls are bit-identical.
func TestTimestepBroadcast(t *testing.T) {
	cfg := parseConfig(t, smallConfig2)
	m, err := New(cfg, randomWeights(t, cfg, 5), backend(t))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	sample := randomTensor(1, 2, 2, cfg.InChannels, 8, 8)
	ehs := randomTensor(2, 2, 1, cfg.CrossAttentionDim[0])
	ids := randomTensor(3, 2, cfg.NumAddedTimeIDs())
	run := func(timestep *tensor.Dense) *tensor.Dense {
		t.Helper()
		out, err := m.Forward(sample, timestep, ehs, ids)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	const ts = 0.7
	one := run(&tensor.Dense{Shape: []int{1}, Data: []float32{ts}})
	again := run(&tensor.Dense{Shape: []int{1}, Data: []float32{ts}})
	pair := run(&tensor.Dense{Shape: []int{2}, Data: []float32{ts, ts}})
	scalar := run(&tensor.Dense{Data: []float32{ts}})
	if !tensor.BitEqual(one, again) {
		t.Fatalf("two identical calls differ: rel %.3g", tensor.RelL2(again, one))
	}
	if !tensor.BitEqual(one, pair) || !tensor.BitEqual(one, scalar) {
		t.Fatalf("[1], [B] and scalar timesteps differ: rel %.3g, %.3g", tensor.RelL2(pair, one), tensor.RelL2(scalar, one))
	}
	mixed := run(&tensor.Dense{Shape: []int{2}, Data: []float32{ts, -1}})
	half := len(one.Data) / 2
	if !slices.Equal(mixed.Data[:half], one.Data[:half]) {
		t.Errorf("row 0 changed when only row 1's timestep changed")
	}
	if slices.Equal(mixed.Data[half:], one.Data[half:]) {
		t.Errorf("row 1 ignores its own timestep")
	}
}

// TestOtherConfigs runs configs and latents other than the dev case: non-square, more
// frames, sizes that are not multiples of 2^levels (upsampling to the skip's size), three
// levels with per-level layer counts. Each batch row must give (almost) what it gives
// alone, which catches any mixing of the batch and frame axes.
func TestOtherConfigs(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  string
		b, t int
		h, w int
	}{
		{"non-square 16x12 T=3", smallConfig2, 2, 3, 16, 12},
		{"T=5 odd 7x5", smallConfig2, 2, 5, 7, 5},
		{"3 levels 10x6 T=2", smallConfig3, 2, 2, 10, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := parseConfig(t, tc.cfg)
			m, err := New(cfg, randomWeights(t, cfg, 7), backend(t))
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			d := cfg.CrossAttentionDim[0]
			k := cfg.NumAddedTimeIDs()
			sample := randomTensor(1, tc.b, tc.t, cfg.InChannels, tc.h, tc.w)
			ehs := randomTensor(2, tc.b, 1, d)
			ids := randomTensor(3, tc.b, k)
			ts := &tensor.Dense{Shape: []int{1}, Data: []float32{0.3}}
			out, err := m.Forward(sample, ts, ehs, ids)
			if err != nil {
				t.Fatal(err)
			}
			want := []int{tc.b, tc.t, cfg.OutChannels, tc.h, tc.w}
			if !slices.Equal(out.Shape, want) {
				t.Fatalf("shape %v, want %v", out.Shape, want)
			}
			for _, v := range out.Data {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					t.Fatal("non-finite output")
				}
			}
			// Row 1 alone.
			row := func(x *tensor.Dense) *tensor.Dense {
				n := len(x.Data) / x.Shape[0]
				return &tensor.Dense{Shape: append([]int{1}, x.Shape[1:]...), Data: x.Data[n:]}
			}
			alone, err := m.Forward(row(sample), ts, row(ehs), row(ids))
			if err != nil {
				t.Fatal(err)
			}
			if rel := tensor.RelL2(alone, row(out)); rel > 1e-6 {
				t.Fatalf("row 1 alone differs from row 1 in the batch: rel %.3g", rel)
			}
			half := len(out.Data) / 2
			if slices.Equal(out.Data[:half], out.Data[half:]) {
				t.Fatal("rows with different inputs gave the same output")
			}
		})
	}
}

// TestForwardInputErrors: malformed inputs are rejected with ErrInput before running.
func TestForwardInputErrors(t *testing.T) {
	ck := devCheckpoint(t)
	m := devModel(t, "")
	in := readCase(t, ck, "unet_forward", "inputs")
	s, ts, e, ids := in["sample"], in["timestep"], in["encoder_hidden_states"], in["added_time_ids"]
	for _, tc := range []struct {
		name          string
		s, ts, e, ids *tensor.Dense
	}{
		{"channels", tensor.New(2, 3, 4, 16, 16), ts, e, ids},
		{"rank", tensor.New(6, 8, 16, 16), ts, e, ids},
		{"timestep", s, tensor.New(3), e, ids},
		{"ehs batch", s, ts, tensor.New(1, 1, 32), ids},
		{"ehs width", s, ts, tensor.New(2, 1, 16), ids},
		{"ids", s, ts, e, tensor.New(2, 2)},
		{"nil", s, nil, e, ids},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := m.Forward(tc.s, tc.ts, tc.e, tc.ids); !errors.Is(err, ErrInput) {
				t.Fatalf("err = %v, want ErrInput", err)
			}
		})
	}
}

// TestNearestIndex checks torch's nearest source indices (values computed with
// torch.nn.functional.interpolate(size=...) semantics: floor(i·in/out) in float32).
func TestNearestIndex(t *testing.T) {
	for _, tc := range []struct {
		in, out int
		want    []int
	}{
		{3, 6, []int{0, 0, 1, 1, 2, 2}},
		{3, 5, []int{0, 0, 1, 1, 2}},
		{2, 3, []int{0, 0, 1}},
		{4, 7, []int{0, 0, 1, 1, 2, 2, 3}},
		{5, 10, []int{0, 0, 1, 1, 2, 2, 3, 3, 4, 4}},
		{4, 4, []int{0, 1, 2, 3}},
	} {
		if got := nearestIndex(tc.in, tc.out); !slices.Equal(got, tc.want) {
			t.Errorf("nearestIndex(%d, %d) = %v, want %v", tc.in, tc.out, got, tc.want)
		}
	}
}

// TestContextTokens: attending to a context of two identical tokens is attending to one
// (softmax weights 1/2 each), so the general cross-attention path must agree with the
// single-token path.
func TestContextTokens(t *testing.T) {
	cfg := parseConfig(t, smallConfig2)
	m, err := New(cfg, randomWeights(t, cfg, 9), backend(t))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	d := cfg.CrossAttentionDim[0]
	sample := randomTensor(1, 2, 3, cfg.InChannels, 8, 6)
	one := randomTensor(2, 2, 1, d)
	two := tensor.New(2, 2, d)
	for b := range 2 {
		copy(two.Data[(2*b)*d:], one.Data[b*d:(b+1)*d])
		copy(two.Data[(2*b+1)*d:], one.Data[b*d:(b+1)*d])
	}
	ids := randomTensor(3, 2, cfg.NumAddedTimeIDs())
	ts := &tensor.Dense{Shape: []int{1}, Data: []float32{0.1}}
	a, err := m.Forward(sample, ts, one, ids)
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Forward(sample, ts, two, ids)
	if err != nil {
		t.Fatal(err)
	}
	if rel := tensor.RelL2(b, a); rel > 1e-6 {
		t.Fatalf("two identical context tokens vs one: rel L2 %.3g", rel)
	}
}

// TestForwardRowSplit checks Forward's row splitting (simplego runs rows concurrently): a
// split call gives each row exactly what a call with that row alone gives, and matches the
// unsplit batch call to float32 rounding.
func TestForwardRowSplit(t *testing.T) {
	cfg := parseConfig(t, smallConfig2)
	m, err := New(cfg, randomWeights(t, cfg, 5), backend(t))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	const b = 3
	sample := randomTensor(1, b, 2, cfg.InChannels, 8, 8)
	ehs := randomTensor(2, b, 1, cfg.CrossAttentionDim[0])
	ids := randomTensor(3, b, cfg.NumAddedTimeIDs())
	ts := &tensor.Dense{Shape: []int{b}, Data: []float32{0.7, -0.2, 1.3}}
	forward := func(rowPar int) *tensor.Dense {
		t.Helper()
		m.rowPar = rowPar
		out, err := m.Forward(sample, ts, ehs, ids)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	whole, split := forward(1), forward(2)
	if rel := tensor.RelL2(split, whole); rel > 1e-6 {
		t.Fatalf("split vs whole batch: rel L2 %.3g", rel)
	}
	m.rowPar = 1
	for r := 0; r < b; r++ {
		alone, err := m.Forward(sample.Rows(r, r+1), ts.Rows(r, r+1), ehs.Rows(r, r+1), ids.Rows(r, r+1))
		if err != nil {
			t.Fatal(err)
		}
		// Chunks(3, 2) = [0,2) [2,3): row 2 runs alone in the split call.
		if r == 2 && !tensor.BitEqual(alone, split.Rows(r, r+1)) {
			t.Errorf("row %d: split call differs from the row alone", r)
		}
		if rel := tensor.RelL2(split.Rows(r, r+1), alone); rel > 1e-6 {
			t.Errorf("row %d: rel L2 %.3g against the row alone", r, rel)
		}
	}
}
