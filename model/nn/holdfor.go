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
// (HoldAs). Another value is an error naming the flag and listing the types.
func HoldFor(dtype string) (HoldFunc, error) {
	if dtype == "" || strings.EqualFold(dtype, AutoDType) {
		return HoldAsStored, nil
	}
	t, err := quant.Parse(dtype)
	if err != nil {
		return nil, fmt.Errorf("--weights-dtype: %w", err)
	}
	return HoldAs(t), nil
}

// HeldSize returns the bytes NewWeightsHeld keeps for a tensor of shape held in type t on a
// backend that runs vdpp's kernels (the layout they read, panels padded to whole blocks of
// rows); float32 is 4 bytes an element.
func HeldSize(shape []int, t quant.Type) (int64, error) {
	n := tensor.NumElements(shape)
	if t == quant.F32 || len(shape) == 0 || n == 0 {
		return 4 * int64(n), nil
	}
	h, err := newHeld(shape, t)
	if err != nil {
		return 0, err
	}
	return int64(h.size), nil
}

// HeldTypes returns the bytes NewWeightsHeld keeps, by weight type, for a network's tensors
// (name -> shape) stored in the types stored gives and held as hold says, on a backend
// that runs vdpp's kernels: what a planner counts before anything loads.
func HeldTypes(expected map[string][]int, stored func(name string) quant.Type, hold HoldFunc) (map[quant.Type]int64, error) {
	out := map[quant.Type]int64{}
	for name, shape := range expected {
		t := quant.F32
		if n := tensor.NumElements(shape); len(shape) > 0 && n > 0 {
			t = hold(name, shape, stored(name))
		}
		size, err := HeldSize(shape, t)
		if err != nil {
			return nil, fmt.Errorf("nn: tensor %q %v held as %v: %w", name, shape, t, err)
		}
		out[t] += size
	}
	return out, nil
}
