package lora_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vdpp/vdpp/model/checkpoint"
	"github.com/vdpp/vdpp/model/lora"
	"github.com/vdpp/vdpp/safetensors"
	"github.com/vdpp/vdpp/tensor"
)

// target is a tiny network: two linears with biases and a conv, with an original layout
// that calls lin "old".
func target() lora.Target {
	return lora.Target{
		Name: "the test network", Component: "transformer",
		Weights: map[string][]int{
			"lin.weight": {3, 4}, "lin.bias": {3}, "conv.weight": {2, 3, 2, 2}, "table": {2, 3}, "b0.sst": {1, 2, 3},
		},
		Original: &checkpoint.KeyMap{Rules: []checkpoint.KeyRule{{File: "old.**", Network: "lin.**"}, {File: "mod", Network: "table"},
			{File: "*.modulation", Network: "*.sst"}}}, OriginalPrefix: "diffusion_model.",
	}
}

func write(t *testing.T, ts map[string]*tensor.Dense, meta map[string]string) string {
	t.Helper()
	var nts []safetensors.NamedTensor
	for n, d := range ts {
		nts = append(nts, safetensors.NamedTensor{Name: n, Tensor: d})
	}
	p := filepath.Join(t.TempDir(), "lora.safetensors")
	if err := safetensors.WriteFile(p, nts, meta); err != nil {
		t.Fatal(err)
	}
	return p
}

func ones(shape ...int) *tensor.Dense {
	d := tensor.New(shape...)
	for i := range d.Data {
		d.Data[i] = float32(i + 1)
	}
	return d
}

func scalar(v float32) *tensor.Dense { return &tensor.Dense{Shape: []int{}, Data: []float32{v}} }

// Each layout maps onto the same weights with its own scale: alpha / rank for the original
// and kohya layouts, the metadata's lora_alpha / r for diffusers'; diffs and biases apply
// whole.
func TestMapLayouts(t *testing.T) {
	cases := []struct {
		name    string
		tensors map[string]*tensor.Dense
		meta    map[string]string
		layout  string
		scales  map[string]float64
	}{
		{"original", map[string]*tensor.Dense{
			"diffusion_model.old.lora_down.weight": ones(2, 4), "diffusion_model.old.lora_up.weight": ones(3, 2),
			"diffusion_model.old.alpha": scalar(1), "diffusion_model.old.diff_b": ones(3), "diffusion_model.mod.diff": ones(2, 3),
			"diffusion_model.b0.diff_m": ones(1, 2, 3),
		}, nil, lora.LayoutOriginal, map[string]float64{"lin.weight": 0.5, "lin.bias": 1, "table": 1, "b0.sst": 1}},
		{"kohya on original names", map[string]*tensor.Dense{
			"lora_unet_old.lora_down.weight": ones(2, 4), "lora_unet_old.lora_up.weight": ones(3, 2), "lora_unet_old.alpha": scalar(4),
			"lora_unet_conv.lora_down.weight": ones(2, 3, 2, 2), "lora_unet_conv.lora_up.weight": ones(2, 2, 1, 1),
		}, nil, lora.LayoutKohya, map[string]float64{"lin.weight": 2, "conv.weight": 1}},
		{"diffusers with metadata", map[string]*tensor.Dense{
			"transformer.lin.lora_A.weight": ones(2, 4), "transformer.lin.lora_B.weight": ones(3, 2), "transformer.lin.lora_B.bias": ones(3),
		}, map[string]string{"lora_adapter_metadata": `{"r": 2, "lora_alpha": 8}`}, lora.LayoutDiffusers, map[string]float64{"lin.weight": 4, "lin.bias": 4}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := lora.Read(write(t, c.tensors, c.meta))
			if err != nil {
				t.Fatal(err)
			}
			a, err := lora.Map(f, target())
			if err != nil {
				t.Fatal(err)
			}
			if a.Layout != c.layout || len(a.Changes) != len(c.scales) {
				t.Fatalf("layout %s, changes %v; want %s, %v", a.Layout, a.Weights(), c.layout, c.scales)
			}
			for w, s := range c.scales {
				if cs := a.Changes[w]; len(cs) != 1 || cs[0].Scale != s {
					t.Errorf("%s: %+v, want scale %v", w, cs, s)
				}
			}
			if err := lora.Check([]lora.Spec{{Path: f.Path, Strength: 1}}, "", target()); err != nil {
				t.Errorf("Check: %v", err)
			}
		})
	}
}

// A LoRA that does not fit is refused in one line naming the file and the key.
func TestMapRefuses(t *testing.T) {
	cases := []struct {
		name    string
		tensors map[string]*tensor.Dense
		want    string
	}{
		{"other model", map[string]*tensor.Dense{"transformer.blocks.9.attn1.to_q.lora_A.weight": ones(2, 4), "transformer.blocks.9.attn1.to_q.lora_B.weight": ones(3, 2)},
			"key transformer.blocks.9.attn1.to_q.lora_A.weight (weight blocks.9.attn1.to_q.weight) matches no weight of the test network"},
		{"other size", map[string]*tensor.Dense{"diffusion_model.old.lora_down.weight": ones(2, 5), "diffusion_model.old.lora_up.weight": ones(3, 2)},
			"do not fit lin.weight [3 4] of the test network: a LoRA for another model size"},
		{"unknown kohya module", map[string]*tensor.Dense{"lora_unet_nope.lora_down.weight": ones(2, 4), "lora_unet_nope.lora_up.weight": ones(3, 2)},
			"key lora_unet_nope.lora_down.weight names no layer of the test network"},
		{"missing up", map[string]*tensor.Dense{"transformer.lin.lora_A.weight": ones(2, 4)}, "has no matching up"},
		{"dora", map[string]*tensor.Dense{"transformer.lin.lora_A.weight": ones(2, 4), "transformer.lin.lora_B.weight": ones(3, 2), "transformer.lin.dora_scale": ones(3)},
			"dora_scale factors (DoRA, LoCon mid, LoHa, LoKr) are not supported"},
		{"mixed", map[string]*tensor.Dense{"transformer.lin.lora_A.weight": ones(2, 4), "diffusion_model.old.lora_down.weight": ones(2, 4)}, "the keys mix the"},
		{"not a factor", map[string]*tensor.Dense{"transformer.lin.weight": ones(3, 4)}, "key transformer.lin.weight is not a LoRA factor"},
		{"text encoder", map[string]*tensor.Dense{"lora_te_text_model.lora_down.weight": ones(2, 4)}, "is a text encoder's"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := write(t, c.tensors, nil)
			err := lora.Check([]lora.Spec{{Path: p, Strength: 1}}, "", target())
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p) || strings.Contains(err.Error(), "\n") || !errors.Is(err, lora.ErrLoRA) {
				t.Fatalf("err %v, want one line with %q and the file", err, c.want)
			}
		})
	}
}

// The deltas a set hands the network are the factors scaled by strength and alpha / rank,
// in the set's order.
func TestSetDeltas(t *testing.T) {
	f, err := lora.Read(write(t, map[string]*tensor.Dense{
		"diffusion_model.old.lora_down.weight": ones(2, 4), "diffusion_model.old.lora_up.weight": ones(3, 2),
		"diffusion_model.old.alpha": scalar(1), "diffusion_model.old.diff": ones(3, 4),
	}, nil))
	if err != nil {
		t.Fatal(err)
	}
	a, err := lora.Map(f, target())
	if err != nil {
		t.Fatal(err)
	}
	d := lora.Set{{Adapter: a, Strength: 2}, {Adapter: a, Strength: -1}}.Deltas()["lin.weight"]
	if len(d) != 4 || d[0].Up.Data[5] != 6*2*0.5 || d[0].Down.Data[7] != 8 || d[1].Full.Data[11] != 12*2 || d[2].Up.Data[0] != -0.5 || d[3].Full.Data[0] != -1 {
		t.Fatalf("deltas %+v", d)
	}
}

func TestParseSpec(t *testing.T) {
	for in, want := range map[string]lora.Spec{
		"a.safetensors": {"a.safetensors", 1}, "dir/a.safetensors:0.8": {"dir/a.safetensors", 0.8},
		"a:b.safetensors": {"a:b.safetensors", 1}, "x.safetensors:-1.5": {"x.safetensors", -1.5},
	} {
		if got, err := lora.ParseSpec(in); err != nil || got != want {
			t.Errorf("ParseSpec(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", ":1", "a.safetensors:NaN", "a:Inf"} {
		if _, err := lora.ParseSpec(bad); err == nil {
			t.Errorf("ParseSpec(%q) accepted", bad)
		}
	}
}
