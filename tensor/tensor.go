// Package tensor defines Dense, the row-major float32 array that vdpp moves between
// packages: latents handed from stage to stage, conditioning tensors, model inputs and
// outputs. It has no dependencies and no I/O; equality is bit-exact by design, because
// vdpp's determinism contract (pipeline == one process) is stated bit for bit.
package tensor

import (
	"fmt"
	"math"
)

// Dense is a dense row-major float32 tensor. A nil Shape means a scalar.
type Dense struct {
	Shape []int
	Data  []float32
}

// New returns a zero tensor of the given shape. It panics on a negative dimension.
func New(shape ...int) *Dense {
	return &Dense{Shape: append([]int(nil), shape...), Data: make([]float32, NumElements(shape))}
}

// FromData wraps data (not copied) as a tensor of the given shape. It returns an error
// when the element count does not match the shape.
func FromData(data []float32, shape ...int) (*Dense, error) {
	if n := NumElements(shape); n != len(data) {
		return nil, fmt.Errorf("tensor: shape %v needs %d elements, got %d", shape, n, len(data))
	}
	return &Dense{Shape: append([]int(nil), shape...), Data: data}, nil
}

// NumElements returns the product of the dimensions; it panics on a negative one.
func NumElements(shape []int) int {
	n := 1
	for _, d := range shape {
		if d < 0 {
			panic(fmt.Sprintf("tensor: negative dimension in shape %v", shape))
		}
		n *= d
	}
	return n
}

// Len returns the number of elements.
func (t *Dense) Len() int { return len(t.Data) }

// Clone returns a deep copy.
func (t *Dense) Clone() *Dense {
	return &Dense{Shape: append([]int(nil), t.Shape...), Data: append([]float32(nil), t.Data...)}
}

// SameShape reports whether a and b have identical shapes.
func SameShape(a, b *Dense) bool {
	if len(a.Shape) != len(b.Shape) {
		return false
	}
	for i := range a.Shape {
		if a.Shape[i] != b.Shape[i] {
			return false
		}
	}
	return true
}

// BitEqual reports whether a and b have the same shape and bit-identical elements
// (so +0 != -0 and NaN == NaN when the payloads match).
func BitEqual(a, b *Dense) bool {
	if !SameShape(a, b) || len(a.Data) != len(b.Data) {
		return false
	}
	for i := range a.Data {
		if math.Float32bits(a.Data[i]) != math.Float32bits(b.Data[i]) {
			return false
		}
	}
	return true
}

// RelL2 returns |got - ref| / |ref| computed in float64. When |ref| is 0 it returns
// |got| (so two zero tensors give 0). Shapes must have the same element count.
func RelL2(got, ref *Dense) float64 {
	if len(got.Data) != len(ref.Data) {
		return math.Inf(1)
	}
	var num, den float64
	for i := range ref.Data {
		d := float64(got.Data[i]) - float64(ref.Data[i])
		num += d * d
		den += float64(ref.Data[i]) * float64(ref.Data[i])
	}
	if den == 0 {
		return math.Sqrt(num)
	}
	return math.Sqrt(num / den)
}

// MaxAbsDiff returns max |got - ref| in float64 (Inf when the lengths differ).
func MaxAbsDiff(got, ref *Dense) float64 {
	if len(got.Data) != len(ref.Data) {
		return math.Inf(1)
	}
	m := 0.0
	for i := range ref.Data {
		if d := math.Abs(float64(got.Data[i]) - float64(ref.Data[i])); d > m || math.IsNaN(d) {
			m = d
		}
	}
	return m
}

// String gives a short description (shape only), for logs and errors.
func (t *Dense) String() string { return fmt.Sprintf("Dense%v", t.Shape) }
