package checkpoint

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/safetensors"
	"github.com/vdpp/vdpp/tensor"
	"github.com/vdpp/vdpp/tensor/quant"
)

// TestStoredKeepsDType: a bf16 file opens without converting anything, reports its stored
// dtype and sizes, and Each and Tensors give the same float32 bits as converting each
// tensor directly.
func TestStoredKeepsDType(t *testing.T) {
	dir := t.TempDir()
	vals := []float32{1, -2.5, 0.1, 3e-3, 65504, -0.0}
	var raw []byte
	for _, v := range vals {
		h := safetensors.Float32ToBFloat16(v)
		raw = append(raw, byte(h), byte(h>>8))
	}
	err := safetensors.WriteRawFile(filepath.Join(dir, "w.safetensors"), []safetensors.RawTensor{
		{Name: "a", DType: safetensors.BF16, Shape: []int{2, 3}, Data: raw},
		{Name: "b", DType: safetensors.BF16, Shape: []int{3, 2}, Data: raw},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := OpenDir(dir, "w", map[string][]int{"a": {2, 3}, "b": {3, 2}}, LoadDirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ta, oka := st.Type("a")
	_, okz := st.Type("zz")
	if ta != quant.BF16 || !oka || okz || st.StoredBytes() != 24 || st.Float32Bytes() != 48 ||
		st.TypeBytes()[quant.BF16] != 24 || len(st.TypeBytes()) != 1 ||
		strings.Join(st.Names(), ",") != "a,b" || st.Path() != filepath.Join(dir, "w.safetensors") {
		t.Errorf("type %v, stored %d, float32 %d, by type %v, names %v, path %s", ta, st.StoredBytes(), st.Float32Bytes(), st.TypeBytes(), st.Names(), st.Path())
	}
	want, err := safetensors.ToFloat32(safetensors.BF16, raw)
	if err != nil {
		t.Fatal(err)
	}
	all, err := st.Tensors()
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	err = st.Each(func(name string, d *tensor.Dense) error {
		seen = append(seen, name)
		w := &tensor.Dense{Shape: d.Shape, Data: want}
		if !tensor.BitEqual(d, w) || !tensor.BitEqual(all[name], w) {
			t.Errorf("%s: Each %v, Tensors %v, want %v", name, d, all[name], want)
		}
		return nil
	})
	if err != nil || strings.Join(seen, ",") != "a,b" {
		t.Errorf("Each: %v, order %v", err, seen)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := st.Each(func(string, *tensor.Dense) error { return nil }); !errors.Is(err, safetensors.ErrClosed) {
		t.Errorf("Each after Close: %v, want ErrClosed", err)
	}
}

// TestOpenComponentSharded: a component whose weights are sharded opens through its index.
func TestOpenComponentSharded(t *testing.T) {
	dir := tinyCheckpoint(t)
	unet := filepath.Join(dir, "unet")
	writeTensors(t, filepath.Join(unet, "diffusion_pytorch_model.fp16-00001-of-00001.safetensors"), tinyExpected())
	writeText(t, filepath.Join(unet, "diffusion_pytorch_model.fp16.safetensors.index.json"),
		`{"weight_map": {"conv_in.weight": "diffusion_pytorch_model.fp16-00001-of-00001.safetensors", "conv_in.bias": "diffusion_pytorch_model.fp16-00001-of-00001.safetensors"}}`)
	ck, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ck.LoadComponent(UNet, "fp16", tinyExpected(), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b := got["conv_in.bias"]; b == nil || b.Data[3] != 1.5 {
		t.Errorf("conv_in.bias = %v", b)
	}
	if _, _, err := ck.OpenWeights(UNet, "fp16"); !errors.Is(err, ErrWeights) {
		t.Errorf("OpenWeights of a sharded component: %v, want ErrWeights", err)
	}
}
