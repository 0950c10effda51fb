package checkpoint

import (
	"errors"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/gguf"
	"github.com/vdpp/vdpp/safetensors"
	"github.com/vdpp/vdpp/tensor"
	"github.com/vdpp/vdpp/tensor/quant"
)

var testKeys = &KeyMap{
	Layout:   "the test layout",
	Prefixes: []string{"model.diffusion_model."},
	Rules: []KeyRule{
		{File: "blocks.*.q.**", Network: "blocks.*.attn.to_q.**"},
		{File: "head.modulation", Network: "scale_shift_table"},
		{File: "blocks.*.norm3.**", Network: "blocks.*.norm2.**"},
	},
}

func TestKeyMap(t *testing.T) {
	for _, tc := range []struct{ file, net string }{
		{"blocks.3.q.weight", "blocks.3.attn.to_q.weight"},
		{"model.diffusion_model.blocks.3.q.bias", "blocks.3.attn.to_q.bias"},
		{"head.modulation", "scale_shift_table"},
		{"blocks.12.norm3.weight", "blocks.12.norm2.weight"},
		{"blocks.3.q", "blocks.3.q"},                               // ** needs a segment
		{"head.modulation.x", "head.modulation.x"},                 // exact patterns match exactly
		{"blocks.0.attn.to_q.weight", "blocks.0.attn.to_q.weight"}, // already the network's
	} {
		if got := testKeys.ToNetwork(tc.file); got != tc.net {
			t.Errorf("ToNetwork(%q) = %q, want %q", tc.file, got, tc.net)
		}
	}
	if got := testKeys.ToFile("blocks.7.norm2.bias"); got != "blocks.7.norm3.bias" {
		t.Errorf("ToFile = %q", got)
	}
	var none *KeyMap
	if none.ToNetwork("a.b") != "a.b" || none.ToFile("a.b") != "a.b" {
		t.Error("a nil KeyMap renames")
	}
}

func TestSameLayout(t *testing.T) {
	for _, tc := range []struct {
		file, want []int
		ok         bool
	}{
		{[]int{2, 3}, []int{2, 3}, true},
		{[]int{40 * 4, 1, 2, 2}, []int{40, 4, 1, 2, 2}, true}, // stable-diffusion.cpp's 5-dim convolutions
		{[]int{3, 2}, []int{2, 3}, false},
		{[]int{40, 4 * 1, 2, 2}, []int{40, 4, 1, 2, 2}, false},
		{[]int{6}, []int{2, 3}, false},
		{[]int{6, 40}, []int{1, 6, 40}, true}, // ggml drops outer 1s
		{[]int{1, 1, 40}, []int{40}, true},
		{[]int{6, 1}, []int{6}, false},
	} {
		if got := SameLayout(tc.file, tc.want); got != tc.ok {
			t.Errorf("SameLayout(%v, %v) = %v", tc.file, tc.want, got)
		}
	}
}

func ramp(n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(math.Sin(float64(i))) / 4
	}
	return x
}

// TestSingleFileGGUF: a GGUF in another layout (prefix, renamed keys, a 5-dim convolution
// as stable-diffusion.cpp writes it, a tensor ComfyUI-GGUF wrote reshaped) loads onto the
// network's names, hands every tensor over as stored (or dequantized where its blocks cross
// the network's rows), and converts to the same floats as dequantizing directly.
func TestSingleFileGGUF(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.gguf")
	w := gguf.NewWriter()
	x := map[string][]float32{}
	add := func(name string, typ quant.Type, shape []int) {
		x[name] = ramp(tensor.NumElements(shape))
		if err := w.AddFloat32(name, typ, shape, x[name]); err != nil {
			t.Fatal(err)
		}
	}
	add("model.diffusion_model.blocks.0.q.weight", quant.Q8_0, []int{2, 64})
	add("model.diffusion_model.blocks.0.q.bias", quant.F32, []int{2})
	add("model.diffusion_model.head.modulation", quant.F16, []int{1, 2, 4})
	add("model.diffusion_model.conv.weight", quant.BF16, []int{4 * 2, 1, 2, 2}) // [4, 2, 1, 2, 2] merged
	w.Set(gguf.OrigShapePrefix+"model.diffusion_model.blocks.0.norm3.weight", gguf.Int32s(4, 2, 32))
	add("model.diffusion_model.blocks.0.norm3.weight", quant.Q4_K, []int{1, 256}) // blocks of 256 across rows of 32
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	expected := map[string][]int{
		"blocks.0.attn.to_q.weight": {2, 64}, "blocks.0.attn.to_q.bias": {2}, "scale_shift_table": {1, 2, 4},
		"conv.weight": {4, 2, 1, 2, 2}, "blocks.0.norm2.weight": {4, 2, 32},
	}
	st, err := OpenSingleFile(path, expected, SingleFileOptions{Keys: testKeys})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if tb := st.TypeBytes(); tb[quant.Q8_0] != 136 || tb[quant.Q4_K] != 144 || tb[quant.F32] != 8 || tb[quant.F16] != 16 || tb[quant.BF16] != 64 {
		t.Errorf("bytes by type %v", tb)
	}
	fileName := map[string]string{"blocks.0.attn.to_q.weight": "blocks.0.q.weight", "blocks.0.attn.to_q.bias": "blocks.0.q.bias",
		"scale_shift_table": "head.modulation", "conv.weight": "conv.weight", "blocks.0.norm2.weight": "blocks.0.norm3.weight"}
	want := map[string][]float32{}
	for net, file := range fileName { // the values the file holds
		typ, _ := st.Type(net)
		q, _ := quant.Quantize(typ, x["model.diffusion_model."+file])
		want[net] = make([]float32, len(x["model.diffusion_model."+file]))
		quant.Dequantize(typ, q, want[net])
	}
	got := map[string]StoredTensor{}
	err = st.EachStored(func(name string, s StoredTensor) error {
		s.Data = append([]byte(nil), s.Data...)
		got[name] = s
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, shape := range expected {
		s := got[name]
		if !reflect.DeepEqual(s.Shape, shape) {
			t.Errorf("%s: shape %v", name, s.Shape)
		}
		wantType, _ := st.Type(name)
		if name == "blocks.0.norm2.weight" {
			wantType = quant.F32 // q4_K blocks of 256 over rows of 32: dequantized on the way
		}
		if s.Type != wantType {
			t.Errorf("%s: handed over as %v, want %v", name, s.Type, wantType)
		}
		f := make([]float32, tensor.NumElements(shape))
		if err := quant.Dequantize(s.Type, s.Data, f); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(f, want[name]) {
			t.Errorf("%s: handed-over values differ from the file's", name)
		}
	}
	all, err := st.Tensors()
	if err != nil {
		t.Fatal(err)
	}
	for name := range expected {
		if !reflect.DeepEqual(all[name].Data, want[name]) {
			t.Errorf("%s: Tensors differs", name)
		}
	}
}

// TestSingleFileProblems: every problem of a file in another layout is one line naming the
// tensor (with its name in the file) and the file.
func TestSingleFileProblems(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.gguf")
	w := gguf.NewWriter()
	w.AddFloat32("blocks.0.q.weight", quant.Q8_0, []int{2, 64}, ramp(128))
	w.AddFloat32("blocks.0.norm3.weight", quant.F32, []int{3}, ramp(3))
	w.AddFloat32("extra.weight", quant.F32, []int{1}, ramp(1))
	w.Add("iq.weight", quant.Type(16), []int{1, 256}, make([]byte, 66)) // IQ2_XXS: a type vdpp does not read
	w.WriteFile(path)
	expected := map[string][]int{"blocks.0.attn.to_q.weight": {2, 64}, "blocks.0.norm2.weight": {4},
		"scale_shift_table": {1, 2, 4}, "iq.weight": {1, 256}}
	_, err := OpenSingleFile(path, expected, SingleFileOptions{Keys: testKeys})
	var le *LoadError
	if !errors.As(err, &le) || !errors.Is(err, ErrMissingTensor) || !errors.Is(err, ErrShapeMismatch) || !errors.Is(err, ErrUnexpectedTensor) {
		t.Fatalf("%v", err)
	}
	msg := err.Error()
	for _, want := range []string{
		path + " (read as the test layout): 4 tensor problems",
		`tensor "blocks.0.norm2.weight" ("blocks.0.norm3.weight" in the file): shape [3] in file, expected [4]`,
		`tensor "extra.weight": unexpected (shape [1], f32 in file)`,
		`tensor "scale_shift_table" ("head.modulation" in the file): missing from the file`,
		`tensor "iq.weight": type ggml type 16 in file is not one vdpp reads`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("message has several lines: %q", msg)
	}

	// Two names for one tensor.
	w = gguf.NewWriter()
	w.AddFloat32("blocks.0.q.weight", quant.F32, []int{1}, ramp(1))
	w.AddFloat32("blocks.0.attn.to_q.weight", quant.F32, []int{1}, ramp(1))
	w.WriteFile(path)
	_, err = OpenSingleFile(path, map[string][]int{"blocks.0.attn.to_q.weight": {1}}, SingleFileOptions{Keys: testKeys})
	if !errors.Is(err, ErrDuplicateTensor) || !strings.Contains(err.Error(), `both "blocks.0.q.weight" and "blocks.0.attn.to_q.weight"`) {
		t.Errorf("duplicate: %v", err)
	}

	// A safetensors file in the original layout, f64 included.
	sp := filepath.Join(dir, "m.safetensors")
	f64 := make([]byte, 8*3)
	for i, v := range []float64{1.5, -2, 1e-3} {
		b := math.Float64bits(v)
		for k := range 8 {
			f64[8*i+k] = byte(b >> (8 * k))
		}
	}
	if err := safetensors.WriteRawFile(sp, []safetensors.RawTensor{{Name: "model.diffusion_model.blocks.0.norm3.weight", DType: safetensors.F64, Shape: []int{3}, Data: f64}}, nil); err != nil {
		t.Fatal(err)
	}
	st, err := OpenSingleFile(sp, map[string][]int{"blocks.0.norm2.weight": {3}}, SingleFileOptions{Keys: testKeys})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	st.EachStored(func(name string, s StoredTensor) error {
		f := make([]float32, 3)
		quant.Dequantize(s.Type, s.Data, f)
		if s.Type != quant.F32 || !reflect.DeepEqual(f, []float32{1.5, -2, 1e-3}) {
			t.Errorf("%s: %v %v", name, s.Type, f)
		}
		return nil
	})
	if _, err := OpenSingleFile(filepath.Join(dir, "none.gguf"), nil, SingleFileOptions{}); !errors.Is(err, ErrWeights) {
		t.Errorf("missing file: %v", err)
	}
}
