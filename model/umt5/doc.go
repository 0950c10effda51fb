// Package umt5 is the text encoder of Wan text-to-video models, transformers'
// UMT5EncoderModel (google/umt5-xxl in the release), in GoMLX, and the prompt-to-embedding
// step of diffusers' WanPipeline built on it.
//
// # Contract
//
//   - Load reads a transformers folder (Wan's text_encoder/): config.json and
//     model.safetensors, or model.safetensors.index.json and the shards it names (see
//     checkpoint.LoadDir), with fp32, bf16 or fp16 weights; the network always computes in
//     fp32. Every size comes from config.json (ParseConfig applies UMT5Config's defaults);
//     ExpectedTensors lists exactly the state_dict tensors the network reads, derived from
//     the same graph-building code, and a missing, unexpected or mis-shaped tensor is one
//     error naming it. A missing config.json, a missing shard or an index that disagrees
//     with its shards is one error naming the file.
//   - Forward computes what UMT5EncoderModel(input_ids, attention_mask).last_hidden_state
//     computes in fp32: token embedding (shared.weight), then per layer an RMS layer norm
//     (no mean subtraction, no bias), self-attention with unscaled q·kᵀ plus that layer's own
//     relative position bias (umT5 has one in every layer; T5 only in the first) and the
//     padding mask as (1 − mask)·finfo(float32).min, a residual add, an RMS layer norm, the
//     gated-GELU (tanh form) feed-forward (or the config's activation), a residual add, and
//     a final RMS layer norm. Parity with transformers' modeling_umt5.py executed on
//     PyTorch: relative L2 ≤ 1e-4 (see testdata/README.md).
//   - PromptEmbeds is WanPipeline._get_t5_prompt_embeds: PromptClean, a Tokenizer padding to
//     max_sequence_length, the encoder, the real tokens' embeddings zero-padded to
//     max_sequence_length. PromptClean is diffusers' prompt_clean without ftfy (no Go port):
//     Python's html.unescape twice and Python's whitespace rules exactly; see its doc for
//     what ftfy would change.
//   - A Model is safe for concurrent use.
package umt5
