package svd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/vdpp/vdpp/internal/paritycheck"
	"github.com/vdpp/vdpp/internal/shared"
	"github.com/vdpp/vdpp/model/checkpoint"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/lora"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/model/svd/unet"
	"github.com/vdpp/vdpp/safetensors"
	"github.com/vdpp/vdpp/tensor"
)

func readDense(t *testing.T, path string) map[string]*tensor.Dense {
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

// The SVD LoRA cases (the diffusers layout and kohya's, attention, feed-forward, proj_in and
// a 3x3 convolution): the merged weights equal the reference's W + s·(α/r)·up·down and one
// UNet call with them equals the reference's within 1e-5; applied per call over shared
// weights, the LoRA gives the merged model's bits.
func TestLoRAGoldens(t *testing.T) {
	dev := shared.Require(t, "golden", "dev")
	b, err := nn.NewBackend("go")
	if err != nil {
		t.Fatal(err)
	}
	ck, err := checkpoint.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"lora_svd_diffusers", "lora_svd_kohya"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("..", "lora", "testdata", name)
			raw, err := os.ReadFile(filepath.Join(dir, "case.json"))
			if err != nil {
				t.Fatal(err)
			}
			var c struct {
				LoRAs []struct {
					File     string  `json:"file"`
					Strength float64 `json:"strength"`
				} `json:"loras"`
			}
			if err := json.Unmarshal(raw, &c); err != nil {
				t.Fatal(err)
			}
			var l family.LoRAs
			for _, x := range c.LoRAs {
				l.LoRA = append(l.LoRA, lora.Spec{Path: filepath.Join(dir, x.File), Strength: x.Strength})
			}
			if err := (svdFamily{}).CheckLoRAs(dev, l, ""); err != nil {
				t.Fatal(err)
			}
			set, err := loraSet(dev, l, "")
			if err != nil {
				t.Fatal(err)
			}
			deltas := nnDeltas(set)
			base, err := safetensors.Open(filepath.Join(dev, "unet", "diffusion_pytorch_model.safetensors"))
			if err != nil {
				t.Fatal(err)
			}
			defer base.Close()
			m := nn.NewMerger(b)
			defer m.Close()
			fused := readDense(t, filepath.Join(dir, "fused.safetensors"))
			if len(fused) != len(deltas) {
				t.Fatalf("the LoRA changes %d weights, the reference %d", len(deltas), len(fused))
			}
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
					t.Errorf("%s: rel L2 %.3g vs the reference's fused weight", n, rel)
				}
			}
			in := readDense(t, filepath.Join(dir, "inputs.safetensors"))
			want := readDense(t, filepath.Join(dir, "outputs.safetensors"))["output"]
			merged, err := unet.LoadWith(ck, unet.LoadOptions{Deltas: deltas}, b)
			if err != nil {
				t.Fatal(err)
			}
			defer merged.Close()
			got, err := merged.Forward(in["sample"], in["timestep"], in["encoder_hidden_states"], in["added_time_ids"])
			if err != nil {
				t.Fatal(err)
			}
			rel := tensor.RelL2(got, want)
			t.Logf("UNet call: rel L2 %.3g vs the reference", rel)
			if rel > 1e-5 {
				t.Errorf("UNet call: rel L2 %.3g > 1e-5", rel)
			}
			plain, err := unet.Load(ck, "", b)
			if err != nil {
				t.Fatal(err)
			}
			defer plain.Close()
			view, err := plain.WithDeltas(deltas)
			if err != nil {
				t.Fatal(err)
			}
			defer view.Close()
			rt, err := view.Forward(in["sample"], in["timestep"], in["encoder_hidden_states"], in["added_time_ids"])
			if err != nil {
				t.Fatal(err)
			}
			if !tensor.BitEqual(rt, got) {
				t.Errorf("LoRA applied per call differs from merged (rel L2 %.3g)", tensor.RelL2(rt, got))
			}
		})
	}
}
