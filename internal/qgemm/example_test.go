package qgemm_test

import (
	"fmt"

	"github.com/vdpp/vdpp/internal/qgemm"
)

// ExampleMul multiplies two activation rows by a Q8_0 weight matrix of two rows of 32:
// row 0 is 0.5 everywhere (scale 0.5, quants 1), row 1 is 0, 0.25, 0.5, ... (scale 0.25,
// quants 0, 1, 2, ...).
func ExampleMul() {
	const n, k = 2, 32
	blocks := make([]byte, n*34)        // ggml's layout: per row one block, f16 scale then 32 int8
	blocks[0], blocks[1] = 0x00, 0x38   // 0.5 in binary16
	blocks[34], blocks[35] = 0x00, 0x34 // 0.25
	for i := range k {
		blocks[2+i] = 1
		blocks[36+i] = byte(i)
	}
	w, err := qgemm.Pack(qgemm.Q8_0, n, k, blocks)
	if err != nil {
		panic(err)
	}
	a := make([]float32, 2*k)
	a[0] = 1    // row 0 picks weight 0 of each weight row
	a[k+3] = -2 // row 1 takes -2 times weight 3
	c := make([]float32, 2*n)
	qgemm.Mul(2, a, k, w, c, n)
	fmt.Printf("%.3f\n", c)
	// Output: [0.500 0.000 -1.000 -1.500]
}
