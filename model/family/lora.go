package family

import (
	"fmt"

	"github.com/vdpp/vdpp/model/lora"
	"github.com/vdpp/vdpp/pipeline"
	"github.com/vdpp/vdpp/sched"
)

// LoRAs are a generation's LoRAs (the JSON parameters lora and lora_2; generate's --lora and
// --lora-2), each a file and a strength. LoRA applies to every denoiser; when LoRA2 is given,
// LoRA applies to the first expert of a two-expert model and LoRA2 to the second (Wan 2.2's
// LoRAs come in high-noise / low-noise pairs). A server's jobs name files in its LoRA folder.
type LoRAs struct {
	LoRA  []lora.Spec `json:"lora,omitempty"`
	LoRA2 []lora.Spec `json:"lora_2,omitempty"`
}

// Empty reports whether l names no LoRA.
func (l LoRAs) Empty() bool { return len(l.LoRA) == 0 && len(l.LoRA2) == 0 }

// For returns the LoRAs of denoiser expert (1 for a model with one denoiser).
func (l LoRAs) For(expert int) []lora.Spec {
	if expert == 2 && len(l.LoRA2) > 0 {
		return l.LoRA2
	}
	return l.LoRA
}

// LoRATaker is implemented by families whose denoisers take LoRAs: CheckLoRAs maps every
// file of l (paths relative to dir when dir is not "") onto the folder's denoisers from the
// file headers and the configs, without loading weights; the error is one line naming the
// file and the first key that does not fit. Options.LoRAs are merged into the weights at
// Open; a Sampler that is a LoRARunner also applies them per call.
type LoRATaker interface {
	CheckLoRAs(modelDir string, l LoRAs, dir string) error
}

// LoRARunner is implemented by Samplers that apply LoRAs at run time over the weights they
// loaded, which stay shared: StepperLoRA is Stepper with l (files relative to dir) applied
// in every denoiser call, the outputs bit-identical to a model opened with the same LoRAs
// merged (Options.LoRAs). close releases what the LoRAs hold.
type LoRARunner interface {
	StepperLoRA(sc sched.Scheduler, l LoRAs, dir string) (st *pipeline.Stepper, close func(), err error)
}

// CheckLoRAs checks l against the resolved model (LoRATaker); a family without LoRA support
// refuses any LoRA.
func (r Resolved) CheckLoRAs(l LoRAs, dir string) error {
	if l.Empty() {
		return nil
	}
	t, ok := r.Family.(LoRATaker)
	if !ok {
		return fmt.Errorf("%w: the %s family takes no LoRA", ErrParams, r.Family.Name())
	}
	return t.CheckLoRAs(r.Dir, l, dir)
}
