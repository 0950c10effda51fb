package transformer_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/internal/goldentest"
	"github.com/vdpp/vdpp/internal/shared"
	"github.com/vdpp/vdpp/model/checkpoint"
	"github.com/vdpp/vdpp/model/wan/transformer"
	"github.com/vdpp/vdpp/model/wan/wantest"
	"github.com/vdpp/vdpp/tensor"
	"github.com/vdpp/vdpp/tensor/quant"
)

// originalNames is Wan's original state dict of the dev config (2 layers) and of its
// image-to-video variant, as the Wan-AI code names its modules (wan/modules/model.py):
// the spec OriginalKeys is checked against.
func originalNames(layers int, i2v bool) []string {
	names := []string{"patch_embedding.weight", "patch_embedding.bias",
		"text_embedding.0.weight", "text_embedding.0.bias", "text_embedding.2.weight", "text_embedding.2.bias",
		"time_embedding.0.weight", "time_embedding.0.bias", "time_embedding.2.weight", "time_embedding.2.bias",
		"time_projection.1.weight", "time_projection.1.bias", "head.head.weight", "head.head.bias", "head.modulation"}
	if i2v {
		for _, p := range []string{"img_emb.proj.0", "img_emb.proj.1", "img_emb.proj.3", "img_emb.proj.4"} {
			names = append(names, p+".weight", p+".bias")
		}
	}
	for l := range layers {
		b := "blocks." + string(rune('0'+l)) + "."
		names = append(names, b+"modulation", b+"norm3.weight", b+"norm3.bias",
			b+"ffn.0.weight", b+"ffn.0.bias", b+"ffn.2.weight", b+"ffn.2.bias")
		for _, a := range []string{"self_attn.", "cross_attn."} {
			for _, p := range []string{"q", "k", "v", "o"} {
				names = append(names, b+a+p+".weight", b+a+p+".bias")
			}
			names = append(names, b+a+"norm_q.weight", b+a+"norm_k.weight")
		}
		if i2v {
			names = append(names, b+"cross_attn.k_img.weight", b+"cross_attn.k_img.bias",
				b+"cross_attn.v_img.weight", b+"cross_attn.v_img.bias", b+"cross_attn.norm_k_img.weight")
		}
	}
	sort.Strings(names)
	return names
}

// TestOriginalKeys: every tensor the network reads has exactly one name in Wan's original
// layout, the one the Wan-AI code gives it, and the map reads it back.
func TestOriginalKeys(t *testing.T) {
	dev := shared.Require(t, "golden", "wan-dev")
	for _, tc := range []struct {
		dir string
		i2v bool
	}{
		{filepath.Join(dev, "transformer"), false},
		{filepath.Join(dev, "cases", "transformer_forward_i2v", "transformer"), true},
	} {
		cfg, err := transformer.ReadConfig(tc.dir)
		if err != nil {
			t.Fatal(err)
		}
		exp, err := transformer.ExpectedTensors(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for name := range exp {
			orig := transformer.OriginalKeys.ToFile(name)
			if back := transformer.OriginalKeys.ToNetwork(orig); back != name {
				t.Errorf("%s -> %s -> %s", name, orig, back)
			}
			if back := transformer.OriginalKeys.ToNetwork("model.diffusion_model." + orig); back != name {
				t.Errorf("prefixed %s -> %s", orig, back)
			}
			got = append(got, orig)
		}
		sort.Strings(got)
		if want := originalNames(cfg.NumLayers, tc.i2v); !slices.Equal(got, want) {
			t.Errorf("i2v %v: original names\n got  %v\n want %v", tc.i2v, got, want)
		}
	}
}

// TestSingleFileExact: the dev transformer written as one f32 file in every layout (Wan's
// original safetensors, stable-diffusion.cpp's GGUF, ComfyUI-GGUF's two ways) computes the
// folder's output bit for bit; written in bf16, q8_0 and q4_K it loads held in that type
// (no float32 copy of its matrices) and computes an output close to the folder's.
func TestSingleFileExact(t *testing.T) {
	dev := shared.Require(t, "golden", "wan-dev")
	dir := filepath.Join(dev, "transformer")
	weights := goldentest.ReadTensors(t, filepath.Join(dir, "diffusion_pytorch_model.safetensors"))
	cd := filepath.Join(dev, "cases", "transformer_forward")
	in := goldentest.ReadTensors(t, filepath.Join(cd, "inputs.safetensors"))
	b := goldentest.Backend(t)
	forward := func(m *transformer.Model) *tensor.Dense {
		t.Helper()
		out, err := m.Forward(in["hidden_states"], in["timestep"], in["encoder_hidden_states"], nil)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	m, err := transformer.Load(dir, "", b)
	if err != nil {
		t.Fatal(err)
	}
	want := forward(m)
	m.Close()
	tmp := t.TempDir()
	cases := []struct {
		layout wantest.Layout
		typ    quant.Type
		tol    float64    // relative L2 to the folder's output; 0: bit for bit
		held   quant.Type // a type the model must hold some weights in
	}{
		{wantest.OriginalSafetensors, quant.F32, 0, quant.F32}, {wantest.SDCppGGUF, quant.F32, 0, quant.F32},
		{wantest.ComfyGGUF, quant.F32, 0, quant.F32}, {wantest.ComfyGGUF5D, quant.F32, 0, quant.F32},
		{wantest.OriginalSafetensors, quant.BF16, 1e-2, quant.BF16}, {wantest.SDCppGGUF, quant.Q8_0, 3e-2, quant.Q8_0},
		// The dev config's rows (40, 64) are no multiple of 256: ComfyUI-GGUF's quantizer
		// writes them in f16 instead of q4_K.
		{wantest.ComfyGGUF, quant.Q4_K, 1e-2, quant.F16},
	}
	for _, tc := range cases {
		path := filepath.Join(tmp, tc.layout.String()+"-"+tc.typ.String())
		wantest.WriteTransformerFile(t, weights, path, tc.layout, tc.typ)
		m, err := transformer.LoadWith(dir, transformer.LoadOptions{File: path}, b)
		if err != nil {
			t.Fatalf("%v %v: %v", tc.layout, tc.typ, err)
		}
		got := forward(m)
		held := m.HeldBytes()
		m.Close()
		if tc.tol == 0 {
			if !slices.Equal(got.Data, want.Data) {
				t.Errorf("%v %v: output differs", tc.layout, tc.typ)
			}
			continue
		}
		rel := tensor.RelL2(got, want)
		t.Logf("%v %v: relative L2 %.3g, held %v", tc.layout, tc.typ, rel, held)
		if rel == 0 || rel > tc.tol {
			t.Errorf("%v %v: relative L2 %.3g, want in (0, %g]", tc.layout, tc.typ, rel, tc.tol)
		}
		if held[tc.held] == 0 {
			t.Errorf("%v %v: held %v, nothing in %v", tc.layout, tc.typ, held, tc.held)
		}
	}
}

// TestSingleFileErrors: a file of another network, or with an unknown tensor, is one line
// naming the tensor (in both layouts) and the file.
func TestSingleFileErrors(t *testing.T) {
	dev := shared.Require(t, "golden", "wan-dev")
	dir := filepath.Join(dev, "transformer")
	weights := goldentest.ReadTensors(t, filepath.Join(dir, "diffusion_pytorch_model.safetensors"))
	delete(weights, "blocks.1.attn2.to_k.bias")
	weights["blocks.0.ffn.net.2.weight"] = tensor.New(40, 32)
	weights["extra.weight"] = tensor.New(3)
	path := filepath.Join(t.TempDir(), "bad.gguf")
	wantest.WriteTransformerFile(t, weights, path, wantest.SDCppGGUF, quant.F16)
	cfg, _ := transformer.ReadConfig(dir)
	_, err := transformer.OpenWeights(dir, cfg, transformer.LoadOptions{File: path})
	if !errors.Is(err, checkpoint.ErrMissingTensor) || !errors.Is(err, checkpoint.ErrShapeMismatch) || !errors.Is(err, checkpoint.ErrUnexpectedTensor) {
		t.Fatalf("%v", err)
	}
	for _, want := range []string{path + " (read as Wan's original layout): 3 tensor problems",
		`tensor "blocks.0.ffn.net.2.weight" ("model.diffusion_model.blocks.0.ffn.2.weight" in the file): shape [40 32] in file, expected [40 64]`,
		`tensor "blocks.1.attn2.to_k.bias" ("blocks.1.cross_attn.k.bias" in the file): missing`,
		`tensor "model.diffusion_model.extra.weight": unexpected`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
}
