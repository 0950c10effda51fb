package transformer

import (
	"path/filepath"
	"testing"

	"github.com/vdpp/vdpp/internal/goldentest"
	"github.com/vdpp/vdpp/internal/shared"
	"github.com/vdpp/vdpp/tensor"
)

// goldenDir returns shared/golden/wan-dev.
func goldenDir(t *testing.T) string {
	t.Helper()
	return shared.Require(t, "golden", "wan-dev")
}

// The three transformer cases of wan-dev: the output, and the rotary tables, within 1e-5.
func TestGoldenForward(t *testing.T) {
	dir := goldenDir(t)
	for _, c := range []struct{ name, weights string }{
		{"transformer_forward", "transformer"},
		{"transformer_2_forward", "transformer_2"},
		{"transformer_forward_i2v", "cases/transformer_forward_i2v/transformer"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := Load(filepath.Join(dir, c.weights), "", goldentest.Backend(t))
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			cd := filepath.Join(dir, "cases", c.name)
			in := goldentest.ReadTensors(t, filepath.Join(cd, "inputs.safetensors"))
			out := goldentest.ReadTensors(t, filepath.Join(cd, "outputs.safetensors"))
			inter := goldentest.ReadTensors(t, filepath.Join(cd, "intermediates.safetensors"))
			got, err := m.Forward(in["hidden_states"], in["timestep"], in["encoder_hidden_states"], in["encoder_hidden_states_image"])
			if err != nil {
				t.Fatal(err)
			}
			goldentest.CheckClose(t, "output", got, out["output"], 1e-5)

			hs := in["hidden_states"].Shape
			p := m.Config().PatchSize
			f, h, w := hs[2]/p[0], hs[3]/p[1], hs[4]/p[2]
			cos, sin, err := RopeTables(m.Config(), f, h, w)
			if err != nil {
				t.Fatal(err)
			}
			d := m.Config().AttentionHeadDim
			goldentest.CheckClose(t, "rope_cos", &tensor.Dense{Shape: []int{f * h * w, d}, Data: cos}, inter["rope_cos"], 1e-7)
			goldentest.CheckClose(t, "rope_sin", &tensor.Dense{Shape: []int{f * h * w, d}, Data: sin}, inter["rope_sin"], 1e-7)
		})
	}
}
