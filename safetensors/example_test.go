package safetensors_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/vdpp/vdpp/safetensors"
	"github.com/vdpp/vdpp/tensor"
)

func Example() {
	dir, _ := os.MkdirTemp("", "st-example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "weights.safetensors")

	w, _ := tensor.FromData([]float32{1, 2, 3, 4, 5, 6}, 2, 3)
	if err := safetensors.WriteFile(path, []safetensors.NamedTensor{{Name: "layer.weight", Tensor: w}},
		map[string]string{"format": "pt"}); err != nil {
		fmt.Println(err)
		return
	}

	f, err := safetensors.Open(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer f.Close()
	info, _ := f.Info("layer.weight")
	t, _ := f.Tensor("layer.weight")
	fmt.Println(f.Names(), info.DType, info.Shape, t.Data, f.Metadata()["format"])

	_, err = f.Tensor("missing")
	fmt.Println(err != nil)
	// Output:
	// [layer.weight] F32 [2 3] [1 2 3 4 5 6] pt
	// true
}
