package checkpoint_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/vdpp/vdpp/model/checkpoint"
	"github.com/vdpp/vdpp/safetensors"
	"github.com/vdpp/vdpp/tensor"
)

// Example opens a (tiny) checkpoint folder, finds a component's config and weights from
// model_index.json, and opens the weights against the names and shapes a network
// declares: they stay in their stored dtype (bf16 here) until Each converts them, one
// tensor at a time, as a network copies them onto its backend.
func Example() {
	dir, _ := os.MkdirTemp("", "ckpt-example")
	defer os.RemoveAll(dir)
	os.MkdirAll(filepath.Join(dir, "unet"), 0o755)
	os.WriteFile(filepath.Join(dir, "model_index.json"), []byte(`{"unet": ["diffusers", "UNetSpatioTemporalConditionModel"]}`), 0o644)
	os.WriteFile(filepath.Join(dir, "unet", "config.json"), []byte(`{"in_channels": 8, "block_out_channels": [32, 64, 64, 64]}`), 0o644)
	safetensors.WriteRawFile(filepath.Join(dir, "unet", "diffusion_pytorch_model.safetensors"), []safetensors.RawTensor{
		{Name: "conv_in.weight", DType: safetensors.BF16, Shape: []int{32, 8, 3, 3}, Data: make([]byte, 2*32*8*3*3)},
		{Name: "conv_in.bias", DType: safetensors.BF16, Shape: []int{32}, Data: make([]byte, 2*32)}}, nil)

	ck, err := checkpoint.Open(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	path, _, err := ck.ReadConfig("unet") // the network's package parses it
	fmt.Println(ck.Components(), filepath.Base(path), err)

	expected := map[string][]int{"conv_in.weight": {32, 8, 3, 3}, "conv_in.bias": {32}}
	st, err := ck.OpenComponent("unet", "", expected, checkpoint.LoadOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	typ, _ := st.Type("conv_in.weight")
	fmt.Println(typ, st.StoredBytes(), st.Float32Bytes())
	st.Each(func(name string, t *tensor.Dense) error {
		fmt.Println(name, t)
		return nil
	})
	st.Close()

	// A network declaring a different input width gets an error naming file and tensor.
	expected["conv_in.weight"] = []int{32, 4, 3, 3}
	_, err = ck.OpenComponent("unet", "", expected, checkpoint.LoadOptions{})
	fmt.Println(err != nil)
	// Output:
	// [unet] config.json <nil>
	// bf16 4672 9344
	// conv_in.bias Dense[32]
	// conv_in.weight Dense[32 8 3 3]
	// true
}

// ExampleReadSampling reads a folder's sampling defaults and fills the settings a user left
// to the model (negative values) from them.
func ExampleReadSampling() {
	dir, _ := os.MkdirTemp("", "sampling-example")
	defer os.RemoveAll(dir)
	s, _ := checkpoint.ReadSampling(dir) // no vdpp_sampling.json: SVD's defaults
	fmt.Println(s.MinGuidance, s.MaxGuidance, s.DecodeChunkSize)

	os.WriteFile(filepath.Join(dir, checkpoint.SamplingFile), []byte(`{"min_guidance": 2, "max_guidance": 4, "decode_chunk_size": 7}`), 0o644)
	s, err := checkpoint.ReadSampling(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	minG, maxG, chunk := s.Resolve(-1, 6, -1) // --max-guidance 6, the rest left to the model
	fmt.Println(minG, maxG, chunk)
	// Output:
	// 1 3 0
	// 2 6 7
}
