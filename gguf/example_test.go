package gguf_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/vdpp/vdpp/gguf"
	"github.com/vdpp/vdpp/tensor/quant"
)

func Example() {
	dir, _ := os.MkdirTemp("", "gguf")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "model.gguf")

	w := gguf.NewWriter()
	w.Set("general.architecture", gguf.String("wan"))
	weight := make([]float32, 2*64)
	for i := range weight {
		weight[i] = float32(i%9) / 8
	}
	if err := w.AddFloat32("blocks.0.self_attn.q.weight", quant.Q8_0, []int{2, 64}, weight); err != nil {
		panic(err)
	}
	if err := w.WriteFile(path); err != nil {
		panic(err)
	}

	f, err := gguf.Open(path)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	for _, t := range f.Tensors() {
		fmt.Println(t.Name, t.Type, "ne", t.Dims, "shape", t.Shape(), t.Size, "bytes")
	}
	x, _ := f.Float32("blocks.0.self_attn.q.weight")
	fmt.Println(f.Architecture(), x[:4])
	// Output:
	// blocks.0.self_attn.q.weight q8_0 ne [64 2] shape [2 64] 136 bytes
	// wan [0 0.12597656 0.25195312 0.3779297]
}
