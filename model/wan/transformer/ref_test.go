package transformer

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/vdpp/vdpp/internal/goldentest"
	"github.com/vdpp/vdpp/tensor"
)

func shapeOf(t *tensor.Dense) []int {
	if t == nil {
		return nil
	}
	return t.Shape
}

// The committed reference cases (testdata/ref, made by scripts/wanref/transformer_cases.py
// executing diffusers v0.35.2): shapes and options the wan-dev folder does not cover, with
// fp16 weights.
func TestReferenceCases(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("testdata", "ref", "*"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no reference cases under testdata/ref (%v)", err)
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			m, err := Load(dir, "fp16", goldentest.Backend(t))
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			in := goldentest.ReadTensors(t, filepath.Join(dir, "inputs.safetensors"))
			out := goldentest.ReadTensors(t, filepath.Join(dir, "outputs.safetensors"))
			got, err := m.Forward(in["hidden_states"], in["timestep"], in["encoder_hidden_states"], in["encoder_hidden_states_image"])
			if err != nil {
				t.Fatal(err)
			}
			goldentest.CheckClose(t, "output", got, out["output"], 1e-5)

			// The rotary tables exactly (float64 angles rounded to float32 on both sides).
			sh, err := CheckInputs(m.Config(), in["hidden_states"].Shape, in["timestep"].Shape, in["encoder_hidden_states"].Shape, shapeOf(in["encoder_hidden_states_image"]))
			if err != nil {
				t.Fatal(err)
			}
			cos, sin, err := RopeTables(m.Config(), sh.F, sh.H, sh.W)
			if err != nil {
				t.Fatal(err)
			}
			d := m.Config().AttentionHeadDim
			goldentest.CheckClose(t, "rope_cos", &tensor.Dense{Shape: []int{sh.Tokens, d}, Data: cos}, out["rope_cos"], 1e-7)
			goldentest.CheckClose(t, "rope_sin", &tensor.Dense{Shape: []int{sh.Tokens, d}, Data: sin}, out["rope_sin"], 1e-7)
		})
	}
	if _, err := os.Stat(filepath.Join("testdata", "ref", "hd64_nonsquare")); err != nil {
		t.Errorf("the head-dim-64 case (rotary split quirk) is missing: %v", err)
	}
}
