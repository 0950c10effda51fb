// Package lora reads LoRA files and maps them onto a denoiser's weights: the pure part of
// vdpp's LoRA support (no GoMLX, no backend).
//
// A LoRA file is a safetensors file of low-rank factors in one of three key layouts, each
// recognised by its keys:
//
//   - diffusers / PEFT: "<component>.<module>.lora_A.weight", ".lora_B.weight" (and
//     ".lora_B.bias"), where component is the pipeline's ("transformer", "unet") and module
//     the network's own name; the scale lora_alpha / r comes from the file's
//     "lora_adapter_metadata" (1 without it), as diffusers loads it;
//   - the original Wan / ComfyUI layout: "diffusion_model.<module>.lora_down.weight",
//     ".lora_up.weight", ".alpha" (or lora_A / lora_B), ".diff" (a whole weight's change),
//     ".diff_b" (a bias's) and ".diff_m" (a block's modulation, lightx2v's), the modules
//     named as the model's original release names
//     them ("blocks.N.self_attn.q"), renamed onto the network by the family's table (the
//     checkpoint.KeyMap its single-file weights are read through);
//   - kohya's: "lora_unet_<module with _ for .>.lora_down.weight", ".lora_up.weight",
//     ".alpha", the module being the network's (SVD) or the original release's (Wan,
//     musubi-tuner's files).
//
// Map turns a file into an Adapter for a Target (the network's weight names and shapes and
// the family's renaming): for every weight it changes, the change ΔW = (α/r)·B·A (and the
// whole-tensor diffs), with the keys mapped as diffusers v0.35.2's converters map them
// (loaders/lora_conversion_utils.py: _convert_non_diffusers_wan_lora_to_diffusers,
// _convert_musubi_wan_lora_to_diffusers), written here as tables. A key that maps to no
// weight of the target, or a factor whose shape does not fit the weight (a LoRA for another
// model size), is one error line naming the key and the file. Set.Deltas scales the
// adapters by their strengths into the factors a network applies, W + Σ s·(α/r)·B·A, either
// merged into the weights at load or in the graph at run time (model/nn).
//
// Two documented departures from diffusers: ".diff" and ".diff_m" tensors (whole-weight and
// modulation changes) are applied, as ComfyUI and lightx2v apply them, where diffusers
// v0.35.2 logs and drops them (and drops the norms' ".diff" tensors, which released LoRAs
// hold as zeros); DoRA ("dora_scale"),
// LoHa and LoKr factors are refused rather than dropped.
package lora
