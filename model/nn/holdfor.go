package nn

import (
	"fmt"
	"strings"

	"github.com/vdpp/vdpp/tensor"
	"github.com/vdpp/vdpp/tensor/quant"
)

// AutoDType is the --weights-dtype value that holds every tensor as its file stores it.
const AutoDType = "auto"

// HoldFor returns the HoldFunc of a --weights-dtype value: "" or "auto" holds the weights as
// stored (HoldAsStored); a weight type of tensor/quant's table converts them at load
// (HoldAs), and so does a mix of its (HoldMix). Another value is an error naming the flag
// and listing the values.
func HoldFor(dtype string) (HoldFunc, error) {
	if dtype == "" || strings.EqualFold(dtype, AutoDType) {
		return HoldAsStored, nil
	}
	if m, ok := quant.ParseMix(dtype); ok {
		return HoldMix(m), nil
	}
	if err := quant.CheckDType(dtype); err != nil {
		return nil, fmt.Errorf("--weights-dtype: %w", err)
	}
	t, _ := quant.Parse(dtype) // a type: CheckDType passed and it is no mix
	return HoldAs(t), nil
}

// HeldSize returns the bytes NewWeightsHeld keeps for a tensor of shape held in type t on a
// backend that runs vdpp's kernels (the layout they read, panels padded to whole blocks of
// rows); float32 is 4 bytes an element.
func HeldSize(shape []int, t quant.Type) (int64, error) {
	return Holding{Kernels: true}.Size(shape, t)
}

// Size returns the bytes NewWeightsHeld keeps for a tensor of shape held in type t (a type
// h.Type returned) on a backend of this holding: with the kernels, the layout they read
// (panels padded to whole blocks of rows); a half dtype 2 bytes an element, float32 4.
func (h Holding) Size(shape []int, t quant.Type) (int64, error) {
	n := tensor.NumElements(shape)
	switch {
	case t == quant.F32 || len(shape) == 0 || n == 0:
		return 4 * int64(n), nil
	case !h.Kernels && (t == quant.BF16 || t == quant.F16):
		return 2 * int64(n), nil
	case !h.Kernels:
		return 0, fmt.Errorf("nn: %v is held in f32 on a backend without vdpp's CPU kernels", t)
	}
	held, err := newHeld(shape, t)
	if err != nil {
		return 0, err
	}
	return int64(held.size), nil
}

// HeldTypes returns the bytes NewWeightsHeld keeps, by weight type, for a network's tensors
// (name -> shape) stored in the types stored gives and held as hold says, on a backend of
// holding h (HoldingForSpec of the --backend value): what a planner counts before
// anything loads.
func HeldTypes(h Holding, expected map[string][]int, stored func(name string) quant.Type, hold HoldFunc) (map[quant.Type]int64, error) {
	out := map[quant.Type]int64{}
	for name, shape := range expected {
		t := quant.F32
		if n := tensor.NumElements(shape); len(shape) > 0 && n > 0 {
			t = h.Type(hold(name, shape, stored(name)))
		}
		size, err := h.Size(shape, t)
		if err != nil {
			return nil, fmt.Errorf("nn: tensor %q %v held as %v: %w", name, shape, t, err)
		}
		out[t] += size
	}
	return out, nil
}

// Widened returns float32 weights (stored as float32 in w) as a call holding them under hold
// computes with: each tensor hold puts in another type is quantized to it and widened back,
// the others are w's own. A model built from the result without holding is the reference a
// held model's kernels are checked against.
func Widened(w map[string]*tensor.Dense, hold HoldFunc) (map[string]*tensor.Dense, error) {
	out := make(map[string]*tensor.Dense, len(w))
	for name, d := range w {
		out[name] = d
		ht := hold(name, d.Shape, quant.F32)
		if ht == quant.F32 {
			continue
		}
		raw, err := quant.Quantize(ht, d.Data)
		if err != nil {
			return nil, fmt.Errorf("%s as %v: %w", name, ht, err)
		}
		out[name] = tensor.New(d.Shape...)
		if err := quant.Dequantize(ht, raw, out[name].Data); err != nil {
			return nil, fmt.Errorf("%s as %v: %w", name, ht, err)
		}
	}
	return out, nil
}
