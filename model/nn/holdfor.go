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
