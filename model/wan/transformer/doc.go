// Package transformer is Wan 2.x's denoiser, diffusers' WanTransformer3DModel (v0.35), in
// GoMLX: patch embedding (a Conv3d with kernel = stride = patch, run as one matrix
// product), the 3-axis rotary embedding, the timestep sinusoid and time embedder with its
// six modulation vectors, the text embedder, the transformer blocks (self-attention with
// RMS q/k norm across heads and RoPE, cross-attention, tanh-GELU feed-forward, all
// modulated through scale_shift_table), the output norm modulated by the time embedding,
// proj_out and the unpatchify. The Wan 2.1 I2V variant (image_dim, added_kv_proj_dim: an
// image embedder and a second cross-attention to the image tokens) and per-token
// timesteps (Wan 2.2 TI2V's expand_timesteps: timestep [B, tokens]) are supported.
//
// # Contract
//
// Every size comes from config.json (ParseConfig, with diffusers' defaults for absent
// keys): heads, head dim, layers, patch sizes, channels, text and image widths. Inputs and
// output use diffusers' layouts: hidden_states [B, C, F, H, W], timestep [B] (each batch
// row its own t; a scalar or [1] is broadcast) or [B, tokens], encoder_hidden_states
// [B, L, text_dim], encoder_hidden_states_image [B, S, image_dim]; the output is
// [B, out_channels, F, H, W] (dimensions that do not fill a patch are dropped, as the
// strided convolution drops them). The computation follows the reference as it runs,
// including its quirks: the rotary tables are built with one split of the head dim and
// read with another (they differ when head_dim mod 6 >= 3), and a transformer with the
// image branch needs exactly TextContextLen text rows. Parity with diffusers executed on
// PyTorch is checked by model/wan/parity (rel L2 <= 1e-4; measured ~1e-6).
//
// Weights are read through nn.Scope with their diffusers names; ExpectedTensors lists them
// from the same graph-building code, and Load checks a file against it before any memory
// is allocated for the network. LoadWith reads one file instead (OriginalKeys: Wan's
// original layout, GGUF or safetensors) and holds each tensor in the type LoadOptions.Hold
// says; Hold wraps a --weights-dtype conversion so the output head keeps its stored type.
//
// # Context parallelism
//
// ForwardFrames evaluates the network as one member of a context-parallel group (Ulysses
// sequence parallelism): each member holds consecutive latent frames, hence a contiguous
// shard of the token sequence; everything but the self-attention product runs on the shard
// (the q/k RMS norm over all heads included, before the split into heads), and around each
// self-attention two all-to-alls move q, k, v from sequence shards to head shards and the
// output back. Head counts and sequence lengths need not divide by the group size (uneven
// contiguous splits, HeadRanges); a group larger than the head count, or a shard that is not
// whole temporal patches, is ErrFrames. Joined over the members the output matches Forward
// within 1e-5 relative L2 (measured: bit-identical on the go backend).
package transformer
