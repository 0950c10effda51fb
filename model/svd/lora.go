package svd

import (
	"fmt"

	"github.com/vdpp/vdpp/model/checkpoint"
	"github.com/vdpp/vdpp/model/family"
	"github.com/vdpp/vdpp/model/lora"
	"github.com/vdpp/vdpp/model/nn"
	"github.com/vdpp/vdpp/model/svd/unet"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/sched"
)

// LoRATarget is the folder's UNet as a LoRA target: its parameters under diffusers' "unet"
// prefix (the diffusers / PEFT layout) and kohya's lora_unet_ names of the same modules. SVD
// has no original layout of its own here (a LoRA in the generative-models names is refused).
func LoRATarget(dir string) (lora.Target, error) {
	ck, err := checkpoint.Open(dir)
	if err != nil {
		return lora.Target{}, err
	}
	cfg, err := unet.ReadConfig(ck)
	if err != nil {
		return lora.Target{}, err
	}
	exp, err := unet.ExpectedTensors(cfg)
	if err != nil {
		return lora.Target{}, err
	}
	return lora.Target{Name: fmt.Sprintf("the SVD UNet (%v channels)", cfg.BlockOutChannels), Component: "unet", Weights: exp}, nil
}

// loraSet reads and maps the UNet's LoRAs of l (files relative to dir).
func loraSet(modelDir string, l family.LoRAs, dir string) (lora.Set, error) {
	if len(l.LoRA2) > 0 {
		return nil, fmt.Errorf("%w: lora_2 (--lora-2) is for a two-expert model; SVD has one UNet", family.ErrParams)
	}
	t, err := LoRATarget(modelDir)
	if err != nil {
		return nil, err
	}
	return lora.Load(l.For(1), dir, t)
}

// nnDeltas converts a LoRA set's deltas for the network.
func nnDeltas(s lora.Set) map[string][]nn.Delta {
	out := map[string][]nn.Delta{}
	for w, ds := range s.Deltas() {
		for _, d := range ds {
			out[w] = append(out[w], nn.Delta{Up: d.Up, Down: d.Down, Full: d.Full})
		}
	}
	return out
}

// CheckLoRAs implements family.LoRATaker.
func (svdFamily) CheckLoRAs(dir string, l family.LoRAs, loraDir string) error {
	if len(l.LoRA2) > 0 {
		return fmt.Errorf("%w: lora_2 (--lora-2) is for a two-expert model; SVD has one UNet", family.ErrParams)
	}
	t, err := LoRATarget(dir)
	if err != nil {
		return err
	}
	return lora.Check(l.LoRA, loraDir, t)
}

var _ family.LoRATaker = svdFamily{}

// StepperLoRA implements family.LoRARunner: Stepper with the UNet applying l in every call
// over the loaded weights (unet.Model.WithDeltas).
func (s *Sampler) StepperLoRA(sc sched.Scheduler, l family.LoRAs, dir string) (*pipeline.Stepper, func(), error) {
	st, err := s.Stepper(sc)
	if err != nil || l.Empty() {
		return st, func() {}, err
	}
	set, err := loraSet(s.P.Checkpoint.Dir, l, dir)
	if err != nil {
		return nil, nil, err
	}
	v, err := s.P.UNet.WithDeltas(nnDeltas(set))
	if err != nil {
		return nil, nil, err
	}
	p := *s.P
	p.UNet = v
	st.Model = &Denoiser{P: &p}
	return st, func() { v.Close() }, nil
}

var _ family.LoRARunner = (*Sampler)(nil)
