package quant_test

import (
	"fmt"

	"github.com/vdpp/vdpp/tensor/quant"
)

func Example() {
	row := make([]float32, 32) // one q8_0 block
	for i := range row {
		row[i] = float32(i) / 10
	}
	typ, err := quant.Parse("q8_0") // as --weights-dtype spells it
	if err != nil {
		panic(err)
	}
	b, err := quant.Quantize(typ, row)
	if err != nil {
		panic(err)
	}
	back := make([]float32, len(row))
	if err := quant.Dequantize(typ, b, back); err != nil {
		panic(err)
	}
	fmt.Printf("%v: %d weights in %d bytes, ggml type %d\n", typ, len(row), len(b), uint32(typ))
	fmt.Printf("%.4f %.4f\n", back[1], back[31])
	// A 64-weight row does not fit q4_K's blocks of 256: held as q5_0, as llama.cpp does.
	fmt.Println(quant.Q4_K.Fallback(64, quant.BF16))
	// Output:
	// q8_0: 32 weights in 34 bytes, ggml type 8
	// 0.0977 3.1006
	// q5_0
}
