package eval_test

import (
	"fmt"

	"github.com/vdpp/vdpp/eval"
)

func ExamplePSNR() {
	p, _ := eval.PSNR([]float32{0, 0, 0, 0}, []float32{0.1, 0.1, 0.1, 0.1})
	fmt.Printf("%.1f dB\n", p)
	fmt.Println(eval.MeanAfterFirst([]float64{100, 20, 22}))
	// Output:
	// 20.0 dB
	// 21
}
