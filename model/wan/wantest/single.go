package wantest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/gguf"
	"github.com/vdpp/vdpp/model/wan/transformer"
	"github.com/vdpp/vdpp/safetensors"
	"github.com/vdpp/vdpp/tensor"
	"github.com/vdpp/vdpp/tensor/quant"
)

// Layout is how WriteTransformerFile writes a transformer as one file, following the tool
// that writes such files.
type Layout int

const (
	// OriginalSafetensors: Wan's original names in a safetensors file, as the Wan-AI
	// releases and Comfy-Org's repacks ship them (every tensor in the asked float type).
	OriginalSafetensors Layout = iota
	// SDCppGGUF: stable-diffusion.cpp's convert (`sd-cli -M convert --diffusion-model F
	// --type T`): the original names under "model.diffusion_model.", no metadata, a 5-dim
	// convolution [o, i, t, h, w] stored as 4 dims [o·i, t, h, w], outer dimensions of 1
	// dropped (ggml's n_dims), and a tensor converted to T unless its rows do not fit T's
	// blocks, or its name ends in ".bias" or contains "embedding" (model_loader.cpp's
	// tensor_should_be_converted). For f32, f16 and q8_0 the file is the one sd-cli writes
	// (TestSDCppConvert); its other block types quantize with a unit importance matrix,
	// which this writer does not (it writes ggml's reference quantization).
	SDCppGGUF
	// ComfyGGUF: ComfyUI-GGUF's convert.py then its patched llama-quantize: the original
	// names, general.architecture "wan", 1-dim tensors, tensors of at most 1024 weights and
	// the modulations in f32, the others in T (f16 when a k-quant's 256 do not divide their
	// rows), and the 5-dim convolution flattened to [o, i·t·h·w] with its shape in
	// comfy.gguf.orig_shape.<name>.
	ComfyGGUF
	// ComfyGGUF5D is ComfyGGUF with the 5-dim convolution as fix_5d_tensors.py adds it back:
	// f32 with its 5 dimensions.
	ComfyGGUF5D
)

func (l Layout) String() string {
	return [...]string{"original-safetensors", "sdcpp-gguf", "comfy-gguf", "comfy-gguf-5d"}[l]
}

// WriteTransformerFile writes a transformer's weights (diffusers names, float32) as one file
// in layout, its weights in type typ where the layout's tool would convert them.
func WriteTransformerFile(t testing.TB, weights map[string]*tensor.Dense, path string, layout Layout, typ quant.Type) {
	t.Helper()
	if err := writeTransformerFile(weights, path, layout, typ); err != nil {
		t.Fatal(err)
	}
}

func writeTransformerFile(weights map[string]*tensor.Dense, path string, layout Layout, typ quant.Type) error {
	names := make([]string, 0, len(weights))
	for n := range weights {
		names = append(names, n)
	}
	sort.Strings(names)
	if layout == OriginalSafetensors {
		var raw []safetensors.RawTensor
		dt := map[quant.Type]safetensors.DType{quant.F32: safetensors.F32, quant.F16: safetensors.F16, quant.BF16: safetensors.BF16}[typ]
		if dt == "" {
			return fmt.Errorf("wantest: safetensors holds f32, f16 or bf16, not %v", typ)
		}
		for _, n := range names {
			w := weights[n]
			b, err := quant.Quantize(typ, w.Data)
			if err != nil {
				return err
			}
			raw = append(raw, safetensors.RawTensor{Name: transformer.OriginalKeys.ToFile(n), DType: dt, Shape: slices.Clone(w.Shape), Data: b})
		}
		return safetensors.WriteRawFile(path, raw, nil)
	}
	gw := gguf.NewWriter()
	if layout != SDCppGGUF {
		gw.Set("general.architecture", gguf.String("wan"))
		gw.Set("general.quantization_version", gguf.Uint32(2))
	}
	// The tools write the tensors in the order of their names in the file.
	sort.Slice(names, func(i, j int) bool {
		return transformer.OriginalKeys.ToFile(names[i]) < transformer.OriginalKeys.ToFile(names[j])
	})
	for _, n := range names {
		w := weights[n]
		name := transformer.OriginalKeys.ToFile(n)
		shape := slices.Clone(w.Shape)
		t := typ
		switch layout {
		case SDCppGGUF:
			name = "model.diffusion_model." + name
			if len(shape) == 5 {
				shape = append([]int{shape[0] * shape[1]}, shape[2:]...)
			}
			for len(shape) > 1 && shape[0] == 1 {
				shape = shape[1:]
			}
			if (t.Quantized() && !t.Fits(shape[len(shape)-1])) || strings.HasSuffix(name, ".bias") || strings.Contains(name, "embedding") {
				t = quant.F32
			}
		case ComfyGGUF, ComfyGGUF5D:
			if len(shape) == 1 || len(w.Data) <= 1024 || strings.Contains(name, "modulation") {
				t = quant.F32
			}
			if len(shape) == 5 {
				if layout == ComfyGGUF5D {
					t = quant.F32
				} else {
					orig := make([]int32, len(shape))
					for i, d := range shape {
						orig[i] = int32(d)
					}
					gw.Set(gguf.OrigShapePrefix+name, gguf.Int32s(orig...))
					shape = []int{shape[0], len(w.Data) / shape[0]}
				}
			}
			if !t.Fits(shape[len(shape)-1]) {
				t = quant.F16
			}
		}
		if err := gw.AddFloat32(name, t, shape, w.Data); err != nil {
			return err
		}
	}
	return gw.WriteFile(path)
}

// RandomWeights returns random weights for a transformer of config cfg: every tensor
// ExpectedTensors lists, 0.05·N(0,1) drawn in name order from a PCG stream of seed (the
// same bits on every machine).
func RandomWeights(t testing.TB, cfg transformer.Config, seed uint64) map[string]*tensor.Dense {
	t.Helper()
	exp, err := transformer.ExpectedTensors(cfg)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(exp))
	for n := range exp {
		names = append(names, n)
	}
	sort.Strings(names)
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	out := make(map[string]*tensor.Dense, len(exp))
	for _, n := range names {
		d := tensor.New(exp[n]...)
		for i := range d.Data {
			d.Data[i] = float32(0.05 * r.NormFloat64())
		}
		out[n] = d
	}
	return out
}
