package transformer

import "github.com/vdpp/vdpp/model/checkpoint"

// OriginalKeys is Wan's original key layout (the Wan-AI releases' checkpoints, the
// Comfy-Org repacks, city96's and QuantStack's GGUF files, stable-diffusion.cpp's convert)
// mapped onto the diffusers names this network uses: the mapping of diffusers'
// convert_wan_transformer_to_diffusers (loaders/single_file_utils.py, v0.35.2) and of its
// scripts/convert_wan_to_diffusers.py (which adds FLF2V's img_emb.emb_pos), written as one
// table. Names already in the diffusers layout match no rule and load as they are.
var OriginalKeys = checkpoint.KeyMap{
	Layout: "Wan's original layout",
	// stable-diffusion.cpp's convert writes a denoiser's names under
	// "model.diffusion_model."; ComfyUI-GGUF strips that prefix and "model." alike.
	Prefixes: []string{"model.diffusion_model.", "model."},
	Rules: []checkpoint.KeyRule{
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
		{File: "img_emb.emb_pos", Network: "condition_embedder.image_embedder.pos_embed"},
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
		// The original calls the cross-attention norm norm3 (and has an affine-free norm2
		// before the feed-forward); diffusers calls it norm2.
		{File: "blocks.*.norm3.**", Network: "blocks.*.norm2.**"},
		{File: "blocks.*.ffn.0.**", Network: "blocks.*.ffn.net.0.proj.**"},
		{File: "blocks.*.ffn.2.**", Network: "blocks.*.ffn.net.2.**"},
		{File: "blocks.*.modulation", Network: "blocks.*.scale_shift_table"},
	},
}
