package gemm_test

import (
	"fmt"

	"github.com/vdpp/vdpp/internal/gemm"
)

// ExampleMulNT multiplies a [2, 3] matrix by the transpose of a [2, 3] matrix.
func ExampleMulNT() {
	a := []float32{1, 2, 3, 4, 5, 6} // rows (1 2 3) and (4 5 6)
	b := []float32{1, 0, 0, 0, 1, 1} // rows (1 0 0) and (0 1 1)
	c := make([]float32, 4)
	gemm.MulNT(2, 2, 3, a, b, c)
	fmt.Println(c)
	// Output: [1 5 4 11]
}
