// Package clip is the CLIP vision encoder in GoMLX, shared by the families that condition on
// an image: as Model, Stable Video Diffusion's image encoder, transformers'
// CLIPVisionModelWithProjection (OpenCLIP ViT-H/14 in the release); as HiddenModel, the
// CLIPVisionModel of Wan 2.1 image-to-video, run to one of its hidden states (Wan takes
// hidden_states[-2]). It knows no family: model/svd and model/wan import it, it imports
// neither.
//
// # Contract
//
//   - Forward takes CLIP-normalised pixel values [N, channels, S, S] with S the config's
//     image_size and returns image_embeds [N, projection_dim] and last_hidden_state
//     [N, 1 + (S/patch)², hidden]: patch convolution (no bias), class token, position
//     embedding, pre_layrnorm, num_hidden_layers pre-LN encoder layers; last_hidden_state
//     is the encoder output (before post_layernorm, as transformers returns it);
//     image_embeds = visual_projection(post_layernorm(token 0)).
//   - It computes what transformers' module computes in fp32, with hidden_act "gelu"
//     (exact erf), "quick_gelu" (x·σ(1.702x)) or "gelu_new"/"gelu_pytorch_tanh" (tanh form).
//   - Every size comes from Config (config.go: image_encoder/config.json, read with
//     ReadConfig; the image processor's preprocessor_config.json is FeatureExtractorConfig).
//     ExpectedTensors lists exactly the
//     tensors the network reads (transformers state_dict names), derived from the same
//     graph-building code; Load ignores a stray "vision_model.embeddings.position_ids".
//   - HiddenModel.Forward returns transformers' hidden_states[i] of output_hidden_states:
//     i = 0 is the embeddings after pre_layrnorm, i = k the output of encoder layer k−1
//     (Config.HiddenLayers takes Python's negative indices); only those layers' tensors
//     are read (HiddenTensors), the rest of the file (later layers, post_layernorm, a
//     projection) is skipped.
//   - A Model and a HiddenModel are safe for concurrent use.
package clip
