// Package checkpoint reads a diffusers-style Stable Video Diffusion checkpoint folder:
//
//	model_index.json
//	unet/config.json              + diffusion_pytorch_model[.fp16].safetensors
//	vae/config.json               + diffusion_pytorch_model[.fp16].safetensors
//	image_encoder/config.json     + model[.fp16].safetensors (transformers names)
//	scheduler/scheduler_config.json
//	feature_extractor/preprocessor_config.json
//	vdpp_sampling.json            (optional, vdpp's own: the model's default guidance and decode chunk)
//
// Contract:
//   - Open reads and checks model_index.json only; configs and weights are read on demand,
//     so a pipeline stage touches only the components it needs.
//   - The typed configs apply the diffusers / transformers constructor defaults for absent
//     (or null) keys, expand int-or-list fields to one value per block, and are validated
//     (consistent list lengths, GroupNorm's 32 groups dividing channels, heads dividing
//     channels). Every size a network needs comes from them, never from constants.
//   - Parsing is pure (Parse*Config take bytes and a file name); I/O stays in the
//     Checkpoint methods.
//   - LoadTensors checks a weights file against the exact set of names and shapes the
//     network declares, reporting missing, unexpected and mis-shaped tensors (the first few,
//     sorted by name) in one error, and converts fp16 / bf16 / fp64 weights to float32.
//   - LoadDir reads a transformers-style folder (<stem>.safetensors, or
//     <stem>.safetensors.index.json and its shards): every shard the index names must
//     exist and hold exactly the tensors the index assigns to it (ErrShardIndex), the
//     tensors are checked as LoadTensors checks them, and an optional callback reports the
//     bytes loaded.
//   - ReadSampling returns SVD's defaults (DefaultSampling) for a folder without
//     vdpp_sampling.json, and refuses a file with unknown keys or unusable values.
//   - Every error names the file it is about (and the tensor or key when there is one) and
//     wraps one of the package's sentinel errors, matched with errors.Is.
package checkpoint
