package wan

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/vdpp/vdpp/internal/paritycheck"
	"github.com/vdpp/vdpp/internal/shared"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/lora"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/model/wan/transformer"
	"github.com/vdpp/vdpp/model/wan/wantest"
	"github.com/vdpp/vdpp/safetensors"
	"github.com/vdpp/vdpp/tensor"
)

// loraCase is a case folder of scripts/wanref/lora_cases.py.
type loraCase struct {
	Component string `json:"component"`
	LoRAs     []struct {
		File     string  `json:"file"`
		Layout   string  `json:"layout"`
		Strength float64 `json:"strength"`
	} `json:"loras"`
}

func readLoRACase(t *testing.T, dir string) (loraCase, []lora.Spec) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "case.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c loraCase
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	var specs []lora.Spec
	for _, l := range c.LoRAs {
		specs = append(specs, lora.Spec{Path: filepath.Join(dir, l.File), Strength: l.Strength})
	}
	return c, specs
}

func readAll(t *testing.T, path string) map[string]*tensor.Dense {
	t.Helper()
	ts, err := paritycheck.ReadTensors(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*tensor.Dense{}
	for n, v := range ts {
		out[n] = &tensor.Dense{Shape: v.Shape, Data: v.Data}
	}
	return out
}

// The LoRA cases executed with diffusers v0.35.2 (the original / ComfyUI layout in BF16,
// musubi's kohya-style layout, diffusers' own, two LoRAs at once, a LoRA of the second
// expert): the weights merged at load equal diffusers' fused weights and one transformer
// call equals diffusers' with them, within 1e-5; a model applying the same LoRAs in every
// call over shared weights gives the merged model's bits.
func TestLoRAGoldens(t *testing.T) {
	dev := shared.Require(t, "golden", "wan-dev")
	f, err := Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	b, err := nn.NewBackend("go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"lora_wan_original", "lora_wan_kohya", "lora_wan_diffusers", "lora_wan_two", "lora_wan_expert2"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("..", "lora", "testdata", name)
			c, specs := readLoRACase(t, dir)
			expert := map[string]int{"transformer": 1, "transformer_2": 2}[c.Component]
			l := family.LoRAs{LoRA: specs}
			if expert == 2 {
				l = family.LoRAs{LoRA2: specs}
			}
			if err := (wanFamily{}).CheckLoRAs(dev, l, ""); err != nil {
				t.Fatal(err)
			}
			set, err := f.loraSet(expert, l, "")
			if err != nil {
				t.Fatal(err)
			}
			deltas := nnDeltas(set)
			// The merge of every weight diffusers fused.
			tdir, _ := f.TransformerDir(expert)
			base, err := safetensors.Open(filepath.Join(tdir, "diffusion_pytorch_model.safetensors"))
			if err != nil {
				t.Fatal(err)
			}
			defer base.Close()
			m := nn.NewMerger(b)
			defer m.Close()
			fused := readAll(t, filepath.Join(dir, "fused.safetensors"))
			for n, want := range fused {
				w, err := base.Tensor(n)
				if err != nil {
					t.Fatal(err)
				}
				got, err := m.Merge(n, w, deltas[n])
				if err != nil {
					t.Fatal(err)
				}
				if rel := tensor.RelL2(got, want); rel > 1e-5 {
					t.Errorf("%s: rel L2 %.3g vs diffusers' fused weight", n, rel)
				}
			}
			// Weights diffusers left alone change by nothing (the zero norm diffs).
			for n, ds := range deltas {
				if _, ok := fused[n]; ok {
					continue
				}
				for _, d := range ds {
					if d.Full == nil || tensor.MaxAbsDiff(d.Full, tensor.New(d.Full.Shape...)) != 0 {
						t.Errorf("%s changes, diffusers leaves it", n)
					}
				}
			}
			in := readAll(t, filepath.Join(dir, "inputs.safetensors"))
			want := readAll(t, filepath.Join(dir, "outputs.safetensors"))["output"]
			merged, err := f.LoadTransformerWith(expert, transformer.LoadOptions{Deltas: deltas}, b)
			if err != nil {
				t.Fatal(err)
			}
			defer merged.Close()
			got, err := merged.Forward(in["hidden_states"], in["timestep"], in["encoder_hidden_states"], nil)
			if err != nil {
				t.Fatal(err)
			}
			rel := tensor.RelL2(got, want)
			t.Logf("transformer call: rel L2 %.3g vs diffusers", rel)
			if rel > 1e-5 {
				t.Errorf("transformer call: rel L2 %.3g vs diffusers > 1e-5", rel)
			}
			plain, err := transformer.Load(tdir, "", b)
			if err != nil {
				t.Fatal(err)
			}
			defer plain.Close()
			view, err := plain.WithDeltas(deltas)
			if err != nil {
				t.Fatal(err)
			}
			defer view.Close()
			rt, err := view.Forward(in["hidden_states"], in["timestep"], in["encoder_hidden_states"], nil)
			if err != nil {
				t.Fatal(err)
			}
			if !tensor.BitEqual(rt, got) {
				t.Errorf("LoRA applied per call differs from merged (rel L2 %.3g)", tensor.RelL2(rt, got))
			}
			base0, err := plain.Forward(in["hidden_states"], in["timestep"], in["encoder_hidden_states"], nil)
			if err != nil {
				t.Fatal(err)
			}
			if tensor.RelL2(base0, got) < 1e-3 {
				t.Errorf("the LoRA changes the output by only %.3g", tensor.RelL2(base0, got))
			}
		})
	}
}

// A LoRA of the lightx2v releases' key set (wantest.DistillLoRAShapes: every block linear
// with its bias change, the norms', the modulation's, the embeddings and the head) maps onto
// both experts of the dev checkpoint, every key onto a parameter.
func TestDistillLoRAKeySet(t *testing.T) {
	dev := shared.Require(t, "golden", "wan-dev")
	f, err := Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := f.TransformerConfig(1)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "distill.safetensors")
	if err := wantest.WriteDistillLoRA(path, cfg, 8, 1); err != nil {
		t.Fatal(err)
	}
	shapes, _ := wantest.DistillLoRAShapes(cfg, 8)
	specs := []lora.Spec{{Path: path, Strength: 1}}
	if err := (wanFamily{}).CheckLoRAs(dev, family.LoRAs{LoRA: specs}, ""); err != nil {
		t.Fatal(err)
	}
	for e := 1; e <= 2; e++ {
		set, err := f.loraSet(e, family.LoRAs{LoRA: specs}, "")
		if err != nil {
			t.Fatal(err)
		}
		// Per block: 10 linears (weight and bias), norm2's weight and bias, 4 q/k norms, the
		// modulation; and 6 top-level linears (weight and bias).
		if n, want := len(set.Deltas()), 27*cfg.NumLayers+12; n != want || set[0].Adapter.Rank != 8 {
			t.Fatalf("expert %d: %d weights change (rank %d), want %d from %d keys", e, n, set[0].Adapter.Rank, want, len(shapes))
		}
	}
}
