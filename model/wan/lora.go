package wan

import (
	"fmt"

	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/lora"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/model/wan/transformer"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/sched"
)

// LoRAOriginalPrefix starts every key of a LoRA in Wan's original layout (ComfyUI's, the
// lightx2v and CausVid releases').
const LoRAOriginalPrefix = "diffusion_model."

// LoRATarget is expert's transformer as a LoRA target: its parameters, the "transformer"
// prefix of diffusers' keys and Wan's original names (transformer.OriginalKeys, the table
// single-file weights are read through: the mapping of diffusers'
// convert_wan_transformer_to_diffusers, which _convert_non_diffusers_wan_lora_to_diffusers
// follows for LoRAs).
func (f *Folder) LoRATarget(expert int) (lora.Target, error) {
	cfg, err := f.TransformerConfig(expert)
	if err != nil {
		return lora.Target{}, err
	}
	exp, err := transformer.ExpectedTensors(cfg)
	if err != nil {
		return lora.Target{}, err
	}
	name := Transformer
	if expert == 2 {
		name = Transformer2
	}
	return lora.Target{
		Name:      fmt.Sprintf("the Wan %s (%d blocks, dim %d)", name, cfg.NumLayers, cfg.InnerDim()),
		Component: "transformer", Weights: exp, Original: &transformer.OriginalKeys, OriginalPrefix: LoRAOriginalPrefix,
	}, nil
}

// loraSet reads and maps expert's LoRAs of l (files relative to dir).
func (f *Folder) loraSet(expert int, l family.LoRAs, dir string) (lora.Set, error) {
	specs := l.For(expert)
	if len(specs) == 0 {
		return nil, nil
	}
	t, err := f.LoRATarget(expert)
	if err != nil {
		return nil, err
	}
	return lora.Load(specs, dir, t)
}

// nnDeltas converts a LoRA set's deltas for the network.
func nnDeltas(s lora.Set) map[string][]nn.Delta {
	if len(s) == 0 {
		return nil
	}
	out := map[string][]nn.Delta{}
	for w, ds := range s.Deltas() {
		for _, d := range ds {
			out[w] = append(out[w], nn.Delta{Up: d.Up, Down: d.Down, Full: d.Full})
		}
	}
	return out
}

// CheckLoRAs implements family.LoRATaker: every LoRA of l maps onto the experts it applies to.
func (wanFamily) CheckLoRAs(dir string, l family.LoRAs, loraDir string) error {
	f, err := Open(dir)
	if err != nil {
		return err
	}
	if len(l.LoRA2) > 0 && !f.HasBoundary {
		return fmt.Errorf("%w: lora_2 (--lora-2) needs a two-expert model (model_index.json boundary_ratio)", family.ErrParams)
	}
	for e := 1; e <= f.Experts(); e++ {
		specs := l.For(e)
		if len(specs) == 0 {
			continue
		}
		t, err := f.LoRATarget(e)
		if err != nil {
			return err
		}
		if err := lora.Check(specs, loraDir, t); err != nil {
			return err
		}
	}
	return nil
}

var _ family.LoRATaker = wanFamily{}

// StepperLoRA implements family.LoRARunner: Stepper with each loaded expert applying its
// LoRAs of l in every call over the shared weights (transformer.Model.WithDeltas).
func (s *Sampler) StepperLoRA(sc sched.Scheduler, l family.LoRAs, dir string) (*pipeline.Stepper, func(), error) {
	st, err := s.Stepper(sc)
	if err != nil || l.Empty() {
		return st, func() {}, err
	}
	var views []*transformer.Model
	closeAll := func() {
		for _, v := range views {
			v.Close()
		}
	}
	for i := range st.Experts {
		e := &st.Experts[i]
		set, err := s.Folder.loraSet(e.ID, l, dir)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		if len(set) == 0 {
			continue
		}
		v, err := s.Experts[e.ID-1].WithDeltas(nnDeltas(set))
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		views = append(views, v)
		e.Model = &Denoiser{M: v, ExpandTimesteps: s.Folder.ExpandTimesteps}
	}
	return st, closeAll, nil
}

var _ family.LoRARunner = (*Sampler)(nil)
