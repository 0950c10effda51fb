package model_test

import (
	"fmt"

	"github.com/vdpp/vdpp/model"
	"github.com/vdpp/vdpp/tensor"
)

// An adaptive rule's indicator from per-frame sums: one rank holding both frames, and two
// context-parallel members holding one frame each, compare the same value.
func ExampleChangeOf() {
	prev := []float32{1, -1, 2, 2} // two frames of two values
	cur := []float32{1.5, -1, 2, 1}
	one := tensor.New(1, 2, 2)
	model.ChangeSums(one.Data, cur, prev, 2)
	a, b := tensor.New(1, 1, 2), tensor.New(1, 1, 2)
	model.ChangeSums(a.Data, cur[:2], prev[:2], 1)
	model.ChangeSums(b.Data, cur[2:], prev[2:], 1)
	whole, _ := model.ChangeOf([]*tensor.Dense{one}, 0)
	split, _ := model.ChangeOf([]*tensor.Dense{a, b}, 0)
	fmt.Println(whole, split)
	// Output: 0.25 0.25
}
