package pipeline

import (
	"fmt"

	"github.com/vdpp/vdpp/tensor"
)

// A hand-off carries float32 tensors only, and a float32 holds integers exactly only below
// 2^24: an integer (a sample id, a window, a cache rule's interval or steps) crosses as
// limbs of limbBits bits, each a whole float32 in [0, 2^limbBits), limbs per value: any
// int64 (as its 64 bits) exactly, so no value is rounded on the way and every decode can
// check what it read.
const (
	limbBits = 22
	limbs    = 3 // 66 bits
	limbMask = 1<<limbBits - 1
)

// intsTensor encodes vals exactly, limbs per value, as a [len(vals), limbs] tensor.
func intsTensor(vals ...int64) *tensor.Dense {
	t := tensor.New(len(vals), limbs)
	for i, v := range vals {
		u := uint64(v)
		for j := limbs - 1; j >= 0; j-- {
			t.Data[i*limbs+j] = float32(u & limbMask)
			u >>= limbBits
		}
	}
	return t
}

// intsOf decodes a tensor of intsTensor, refusing one that is not: a shape other than
// [n, limbs], a limb that is not a whole number in [0, 2^limbBits).
func intsOf(t *tensor.Dense) ([]int64, error) {
	if len(t.Shape) != 2 || t.Shape[1] != limbs || len(t.Data) != t.Shape[0]*limbs {
		return nil, fmt.Errorf("integers of shape %v, want [n, %d]", t.Shape, limbs)
	}
	out := make([]int64, t.Shape[0])
	for i := range out {
		var u uint64
		for j := range limbs {
			v := t.Data[i*limbs+j]
			if !wholeIn(v, 0, limbMask) {
				return nil, fmt.Errorf("integer limb %v is not a whole number in [0, 2^%d)", v, limbBits)
			}
			u = u<<limbBits | uint64(v)
		}
		out[i] = int64(u)
	}
	return out, nil
}

// ints64 widens ints for intsTensor.
func ints64(vals ...int) []int64 {
	out := make([]int64, len(vals))
	for i, v := range vals {
		out[i] = int64(v)
	}
	return out
}

// inRange reports whether every value is in [lo, hi].
func inRange(vals []int64, lo, hi int64) bool {
	for _, v := range vals {
		if v < lo || v > hi {
			return false
		}
	}
	return true
}
