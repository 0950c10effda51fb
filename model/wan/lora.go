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

// OriginalNames are Wan's original parameter names mapped onto this transformer's (the
// diffusers names): the mapping of diffusers' convert_wan_transformer_to_diffusers and of
// _convert_non_diffusers_wan_lora_to_diffusers (v0.35.2), as one table. A LoRA in the
// original layout (and musubi-tuner's kohya-style one, whose module names are these with
// "_" for ".") is mapped through it.
var OriginalNames = lora.Rules{
	{File: "text_embedding.0.**", Network: "condition_embedder.text_embedder.linear_1.**"},
	{File: "text_embedding.2.**", Network: "condition_embedder.text_embedder.linear_2.**"},
	{File: "time_embedding.0.**", Network: "condition_embedder.time_embedder.linear_1.**"},
	{File: "time_embedding.2.**", Network: "condition_embedder.time_embedder.linear_2.**"},
	{File: "time_projection.1.**", Network: "condition_embedder.time_proj.**"},
	{File: "head.head.**", Network: "proj_out.**"},
	{File: "head.modulation", Network: "scale_shift_table"},
	{File: "img_emb.proj.0.**", Network: "condition_embedder.image_embedder.norm1.**"},
	{File: "img_emb.proj.1.**", Network: "condition_embedder.image_embedder.ff.net.0.proj.**"},
	{File: "img_emb.proj.3.**", Network: "condition_embedder.image_embedder.ff.net.2.**"},
	{File: "img_emb.proj.4.**", Network: "condition_embedder.image_embedder.norm2.**"},
	{File: "blocks.*.self_attn.q.**", Network: "blocks.*.attn1.to_q.**"},
	{File: "blocks.*.self_attn.k.**", Network: "blocks.*.attn1.to_k.**"},
	{File: "blocks.*.self_attn.v.**", Network: "blocks.*.attn1.to_v.**"},
	{File: "blocks.*.self_attn.o.**", Network: "blocks.*.attn1.to_out.0.**"},
	{File: "blocks.*.self_attn.norm_q.**", Network: "blocks.*.attn1.norm_q.**"},
	{File: "blocks.*.self_attn.norm_k.**", Network: "blocks.*.attn1.norm_k.**"},
	{File: "blocks.*.cross_attn.q.**", Network: "blocks.*.attn2.to_q.**"},
	{File: "blocks.*.cross_attn.k.**", Network: "blocks.*.attn2.to_k.**"},
	{File: "blocks.*.cross_attn.v.**", Network: "blocks.*.attn2.to_v.**"},
	{File: "blocks.*.cross_attn.o.**", Network: "blocks.*.attn2.to_out.0.**"},
	{File: "blocks.*.cross_attn.norm_q.**", Network: "blocks.*.attn2.norm_q.**"},
	{File: "blocks.*.cross_attn.norm_k.**", Network: "blocks.*.attn2.norm_k.**"},
	{File: "blocks.*.cross_attn.k_img.**", Network: "blocks.*.attn2.add_k_proj.**"},
	{File: "blocks.*.cross_attn.v_img.**", Network: "blocks.*.attn2.add_v_proj.**"},
	{File: "blocks.*.cross_attn.norm_k_img.**", Network: "blocks.*.attn2.norm_added_k.**"},
	// The original calls the cross-attention norm norm3; diffusers calls it norm2.
	{File: "blocks.*.norm3.**", Network: "blocks.*.norm2.**"},
	{File: "blocks.*.ffn.0.**", Network: "blocks.*.ffn.net.0.proj.**"},
	{File: "blocks.*.ffn.2.**", Network: "blocks.*.ffn.net.2.**"},
	{File: "blocks.*.modulation", Network: "blocks.*.scale_shift_table"},
}

// LoRATarget is expert's transformer as a LoRA target: its parameters, the "transformer"
// prefix of diffusers' keys and Wan's original names.
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
		Component: "transformer", Weights: exp, Original: OriginalNames, OriginalPrefix: LoRAOriginalPrefix,
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
